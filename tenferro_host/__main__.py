"""``python -m tenferro_host``: the same as the ``tenferro-host`` command."""

from ._cli import main

raise SystemExit(main())

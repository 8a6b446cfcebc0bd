"""``python -m tenferro_host``: the same as the ``tenferro-host`` command."""

from .cli import main

raise SystemExit(main())

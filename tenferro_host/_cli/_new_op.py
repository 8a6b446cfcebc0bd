"""``new-op NAME``: scaffold an operation package."""

from __future__ import annotations

import argparse

from .._host import Host
from ._exit import EXIT_OK


def cmd_new_op(host: Host | None, args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..scaffold import scaffold

    root = scaffold(args.name, Path(args.dir))
    print(
        f"created {root}: edit {args.name}/plugin.py, then `pip install -e {root}` and "
        f"`pytest {root / 'tests'}` (or `sh {root / 'ci.sh'}`)"
    )
    return EXIT_OK

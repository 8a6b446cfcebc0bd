"""``new-op NAME``: scaffold an operation package."""

from __future__ import annotations

import argparse
from typing import Any

from .._host import Host
from ._exit import EXIT_OK


def cmd_new_op(host: Host | None, args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..scaffold import scaffold

    root = scaffold(args.name, Path(args.dir))
    print(
        f"created {root}: edit {root / args.name / 'plugin.py'}, then `pip install -e {root}` and "
        f"`pytest {root / 'tests'}` (or `sh {root / 'ci.sh'}`)"
    )
    return EXIT_OK


def add_parser(sub: Any) -> None:
    """The ``new-op`` command."""
    new_op = sub.add_parser("new-op", help="scaffold an operation package")
    new_op.add_argument("name", metavar="NAME", help="package name, e.g. my_ops")
    new_op.add_argument("--dir", default=".", help="parent directory (default: here)")
    new_op.set_defaults(func=cmd_new_op, json=False, strict=False)

"""``cache stats|prune|clear|path``: the persistent kernel cache of this user."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .._host import Host
from ..errors import ValidationError
from ._args import common_options
from ._tables import emit, make_table


def cmd_cache(host: Host, args: argparse.Namespace) -> int:
    """``cache stats|prune|clear|path``: the persistent kernel cache of this user."""
    from ..provider import kernel_cache as kc

    switch = os.environ.get(kc.ENV_SWITCH, "").strip().lower()
    text = os.environ.get(kc.ENV_MAX_BYTES, "").strip()
    cache = kc.KernelCache(kc.default_dir(), kc.parse_size(text) if text else kc.DEFAULT_MAX_BYTES)
    report: dict[str, Any] = {"path": str(cache.root), "enabled": switch not in kc.OFF}
    try:
        if args.action == "stats":
            report.update(cache.stats())
        elif args.action == "prune":
            report.update(cache.prune())
        elif args.action == "clear":
            report["removed"] = cache.clear()
    except OSError as exc:
        raise ValidationError(
            f"`cache {args.action}` cannot use the kernel cache at {cache.root}: "
            f"{exc.strerror or exc}; "
            f"check its permissions or point {kc.ENV_DIR} elsewhere",
            argument=kc.ENV_DIR,
        ) from exc
    if not args.json:
        print(cache.root)  # first, whole: a table would fold a long path
        if args.action == "path":
            return 0
    rows = [[k, "-" if v is None else str(v)] for k, v in report.items() if k != "path"]
    emit(args, report, make_table(f"Kernel cache: {args.action}", ["", "value"], rows))
    return 0


def add_parser(sub: Any) -> None:
    """The ``cache`` command."""
    cache = sub.add_parser(
        "cache",
        parents=[common_options()],
        help="the persistent kernel cache: stats, prune, clear, path",
    )
    cache.add_argument(
        "action",
        choices=["stats", "prune", "clear", "path"],
        help="stats: entries, bytes, hits, misses, evictions, oldest; prune: drop corrupt "
        "entries, dead temp files and what exceeds the bound; clear: remove every entry; "
        "path: the cache directory",
    )
    cache.set_defaults(func=cmd_cache)

"""``cache stats|prune|clear|path``: the persistent kernel cache of this user."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._host import Host
from ..errors import ValidationError
from ._args import common_options
from ._tables import emit, make_table


def cmd_cache(host: Host, args: argparse.Namespace) -> int:
    """``cache stats|prune|clear|path``: the persistent kernel cache of this user.

    A wrong ``TENFERRO_CACHE`` or ``TENFERRO_CACHE_MAX_BYTES`` is an error here (the compiling
    path warns and runs uncached); ``path`` and ``stats`` say whether the directory is trusted.
    """
    from ..provider import _kernel_cache as kc

    enabled = kc.switched_on()
    cache = kc.KernelCache(kc.default_dir(), kc.max_bytes())
    report: dict[str, Any] = {"path": str(cache.root), "enabled": enabled}
    try:
        if args.action == "stats":
            report.update(cache.stats())
        elif args.action == "path":
            report["trust"] = cache.verdict()
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
        if args.action == "path":  # the verdict on stderr: $(tenferro-host cache path) stays a path
            print(f"trust: {report['trust']}", file=sys.stderr)
            return 0
        if "trust" in report:
            print(f"trust: {report['trust']}")  # whole, like the path
    rows = [
        [k, "-" if v is None else str(v)] for k, v in report.items() if k not in ("path", "trust")
    ]
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
        help="stats: entries, bytes, hits, misses, evictions, oldest, trust; prune: drop corrupt "
        "entries, dead temp files and what exceeds the bound; clear: remove every entry; "
        "path: the cache directory and whether it is trusted",
    )
    cache.set_defaults(func=cmd_cache)

"""``cache stats|prune|clear|path|tables``: the persistent kernel cache of this user."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._host import Host
from .._loader import module_file
from ..errors import ValidationError
from ._args import common_options
from ._tables import emit, make_table


def cmd_cache(host: Host, args: argparse.Namespace) -> int:
    """``cache stats|prune|clear|path|tables``: the persistent kernel cache of this user.

    A wrong ``TENFERRO_CACHE`` or ``TENFERRO_CACHE_MAX_BYTES`` is an error here (the compiling
    path warns and runs uncached); ``path`` and ``stats`` say whether the directory is trusted.
    """
    from ..provider import _kernel_cache as kc

    enabled = kc.switched_on()
    cache = kc.KernelCache(kc.default_dir(), kc.max_bytes())
    if args.action == "tables":
        return _tables(host, args, cache.root)
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


def _tables(host: Host, args: argparse.Namespace, root: Path) -> int:
    """The autotuning tables: shipped ones (in the loaded plugins' packages and those this
    process's autotuned kernels found) and the winners learned in the cache directory."""
    from ..provider import _tuning_tables as tt

    packages = [
        Path(file).parent
        for r in host.plugins.records
        if r.status == "loaded" and r.module and (file := module_file(r.module))
    ]
    rows = tt.shipped_tables([*tt.tables_in(packages), *tt.SHIPPED_SEEN]) + tt.learned_tables(root)
    if not args.json:
        print(root)
    table = make_table(
        "Autotuning tables",
        ["source", "kernel", "device", "key", "config"],
        [
            [
                r["source"],
                str(r.get("kernel", r.get("error"))),
                _fields(r.get("device")),
                _fields(r.get("key")),
                _fields(r.get("config")),
            ]
            for r in rows
        ],
    )
    emit(args, {"path": str(root), "tables": rows}, table)
    return 0


def _fields(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fields(v)}" for k, v in value.items() if v is not None)
    return "-" if value is None else str(value)


def add_parser(sub: Any) -> None:
    """The ``cache`` command."""
    cache = sub.add_parser(
        "cache",
        parents=[common_options()],
        help="the persistent kernel cache: stats, prune, clear, path, tables",
    )
    cache.add_argument(
        "action",
        choices=["stats", "prune", "clear", "path", "tables"],
        help="stats: entries, bytes, hits, misses, evictions, oldest, trust; prune: drop corrupt "
        "entries, dead temp files and what exceeds the bound; clear: remove every entry; "
        "path: the cache directory and whether it is trusted; tables: the autotuning tables, "
        "shipped and learned, with their device keys",
    )
    cache.set_defaults(func=cmd_cache)

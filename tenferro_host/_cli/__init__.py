"""The ``tenferro-host`` command: what this machine offers, and a timed, checked op run.

Commands: ``caps`` (backends, devices, capabilities, plugins, ops), ``plugins``, ``ops``,
``run OP``, ``check DIST|OP`` (the conformance suite) and ``new-op NAME`` (a package
skeleton). Tables are for people; ``--json`` prints stable JSON for scripts and nothing else on
stdout. Exit codes: 0 success, 1 a check failed, 2 a usage or library error or a strict-mode
plugin failure (one line on stderr), 3 an op, a reference or a plugin raised.

>>> import tenferro_host as tf
>>> report = caps_report(tf.Host())
>>> report["schema_version"], "cpu" in [b["name"] for b in report["backends"]]
(1, True)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._host import Host
from ..errors import PluginError, TenferroError
from ._args import list_arg, parse_attr, positive_int, seed_arg, shape_arg, tolerance_arg
from ._bench import cmd_bench
from ._cache import _add_cache_parser
from ._caps import (
    backend_report,
    caps_report,
    cmd_caps,
    cmd_ops,
    cmd_plugins,
    ops_report,
    p2p_report,
    plugins_report,
)
from ._check import cmd_check
from ._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_OP_RAISED, OpRaised
from ._new_op import cmd_new_op
from ._run import cmd_run


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tenferro-host``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--strict",
        action="store_true",
        help="make plugin failures and op name conflicts fatal (also TENFERRO_STRICT_PLUGINS=1)",
    )
    common.add_argument("--json", action="store_true", help="print JSON only, for scripts")

    parser = argparse.ArgumentParser(
        prog="tenferro-host",
        description="GPU tensor host: list backends, plugins and ops; run an op.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    caps = sub.add_parser(
        "caps", parents=[common], help="backends, devices, capabilities, plugins and ops"
    )
    caps.add_argument(
        "--probe-p2p",
        action="store_true",
        help="also copy between every ordered pair of CUDA devices: checksum and bandwidth "
        "(JSON: a 'p2p' list)",
    )
    caps.set_defaults(func=cmd_caps)
    sub.add_parser("plugins", parents=[common], help="installed plugins").set_defaults(
        func=cmd_plugins
    )
    sub.add_parser("ops", parents=[common], help="registered operations").set_defaults(func=cmd_ops)
    tolerances = argparse.ArgumentParser(add_help=False)
    tolerances.add_argument(
        "--rtol", type=tolerance_arg, help="relative tolerance (default: the op's declared one)"
    )
    tolerances.add_argument(
        "--atol", type=tolerance_arg, help="absolute tolerance (default: the op's declared one)"
    )
    run = sub.add_parser(
        "run", parents=[common, tolerances], help="run an op on random inputs, time it, check it"
    )
    run.add_argument("op", metavar="OP", help="operation name, e.g. ext_add_kernel.add")
    run.add_argument("--backend", help="backend name (kind[:index]); default: the best available")
    run.add_argument(
        "--shape", type=shape_arg, default=(1_000_000,), help="input shape (default 1000000)"
    )
    run.add_argument("--dtype", help="input dtype (default float32, if the op accepts it)")
    run.add_argument("--repeat", type=positive_int, default=10, help="timed runs (default 10)")
    run.add_argument("--check", action="store_true", help="compare with the numpy reference")
    run.add_argument("--seed", type=seed_arg, default=0, help="random seed of the inputs (>= 0)")
    run.add_argument(
        "--attr", action="append", default=[], metavar="NAME=VALUE", help="an op attribute"
    )
    run.add_argument(
        "--variant", help="force a variant kind (cpu, cuda-raw, dsl) instead of the host's choice"
    )
    run.set_defaults(func=cmd_run)

    check = sub.add_parser(
        "check",
        parents=[common, tolerances],
        help="run the conformance suite of an op, or of every op of a distribution",
    )
    check.add_argument(
        "targets",
        nargs="+",
        metavar="DIST|OP",
        help="an op name, a distribution name or an op package name",
    )
    check.add_argument(
        "--backends", type=list_arg, help="only these backend kinds, e.g. cpu,webgpu"
    )
    check.add_argument("--variants", type=list_arg, help="only these variant kinds, e.g. dsl")
    check.add_argument(
        "--attr",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an attribute passed to every call of the op (repeatable)",
    )
    check.add_argument(
        "--compile-only",
        action="store_true",
        help="only the GPU-less checks (NVRTC, DSL compile, raw launch arguments)",
    )
    check.set_defaults(func=cmd_check)

    new_op = sub.add_parser("new-op", help="scaffold an operation package")
    new_op.add_argument("name", metavar="NAME", help="package name, e.g. my_ops")
    new_op.add_argument("--dir", default=".", help="parent directory (default: here)")
    new_op.set_defaults(func=cmd_new_op, json=False, strict=False)
    _add_cache_parser(sub, common)
    bench = sub.add_parser(
        "bench", help="the benchmark suite: every op-call figure beside its baseline"
    )
    bench.add_argument("--quick", action="store_true", help="a short smoke run")
    bench.add_argument("--json", metavar="PATH", help="the JSON (default: beside the report)")
    bench.add_argument(
        "--report",
        default="docs/performance.md",
        metavar="PATH",
        help="the markdown report; the PNG chart goes beside it (default docs/performance.md)",
    )
    bench.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GROUP",
        help="measure only this group (cpu, webgpu, cuda, cuda-bandwidth, dsl-backends, compile)",
    )
    bench.set_defaults(func=cmd_bench, strict=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tenferro-host`` and ``python -m tenferro_host``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.func is cmd_new_op:
            return cmd_new_op(None, args)
        host = Host(strict=True if args.strict else None)
        host.plugins  # noqa: B018 - load now, so strict mode fails before any output
        return int(args.func(host, args))
    except OpRaised as exc:
        print(f"tenferro-host: op error: {exc}", file=sys.stderr)
        return EXIT_OP_RAISED
    except PluginError as exc:  # strict mode: a plugin failed to load (usage, like --strict)
        print(f"tenferro-host: plugin error: {exc}", file=sys.stderr)
    except TenferroError as exc:
        print(f"tenferro-host: error: {exc}", file=sys.stderr)
    return EXIT_ERROR


__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_OP_RAISED",
    "backend_report",
    "build_parser",
    "caps_report",
    "main",
    "ops_report",
    "p2p_report",
    "parse_attr",
    "plugins_report",
    "shape_arg",
]

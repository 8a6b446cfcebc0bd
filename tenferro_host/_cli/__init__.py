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
from . import _bench, _cache, _caps, _check, _new_op, _run
from ._args import parse_attr, shape_arg
from ._caps import backend_report, caps_report, ops_report, p2p_report, plugins_report
from ._exit import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_OK, EXIT_OP_RAISED, OpRaised
from ._new_op import cmd_new_op


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tenferro-host``: each command adds its own."""
    parser = argparse.ArgumentParser(
        prog="tenferro-host",
        description="GPU tensor host: list backends, plugins and ops; run an op.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (_caps, _run, _check, _new_op, _cache, _bench):
        command.add_parser(sub)
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

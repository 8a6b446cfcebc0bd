"""The ``tenferro-host`` command: what this machine offers, and a timed, checked op run.

Commands, one module each: ``caps`` (backends, devices, capabilities, plugins, ops),
``plugins``, ``ops``, ``run OP``, ``check DIST|OP`` (the conformance suite), ``new-op NAME``
(a package skeleton), ``cache`` and ``bench``. Tables are for people (``_tables``); ``--json``
prints stable JSON for scripts and nothing else on stdout, an error document when the command
fails (:func:`error_report`). Exit codes (``_exit``): 0 success, 1 a check failed, 2 a usage or
library error, a strict-mode plugin failure or an unwritable stdout, 3 an op, a reference, a
rule or the plugin of the op's package raised; one line on stderr.

>>> import tenferro_host as tf
>>> report = caps_report(tf.Host())
>>> report["schema_version"], "cpu" in [b["name"] for b in report["backends"]]
(1, True)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from .._host import Host
from ..errors import PluginError, RuleError, TenferroError
from . import _bench, _cache, _caps, _check, _new_op, _run
from ._args import parse_attr, shape_arg
from ._caps import backend_report, caps_report, ops_report, p2p_report, plugins_report
from ._exit import (
    EXIT_CHECK_FAILED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_OP_RAISED,
    SCHEMA_VERSION,
    OpRaised,
)
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
        code = _command(args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at interpreter exit
        return code
    except (OpRaised, RuleError) as exc:  # the op's package is at fault
        _fail(args, "op error", exc, EXIT_OP_RAISED)
        if getattr(args, "traceback", False) and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__)
        return EXIT_OP_RAISED
    except PluginError as exc:  # strict mode: a plugin failed to load (usage, like --strict)
        return _fail(args, "plugin error", exc, EXIT_ERROR)
    except TenferroError as exc:
        return _fail(args, "error", exc, EXIT_ERROR)
    except BrokenPipeError:  # the reader left (`caps --json | head`): nothing more to say
        _detach_stdout()
    except OSError as exc:  # e.g. stdout on a full disk
        _detach_stdout()
        _say(f"error: cannot write {exc.filename or 'the output'}: {exc.strerror or exc}")
    return EXIT_ERROR


def _command(args: argparse.Namespace) -> int:
    if args.func is cmd_new_op:
        return cmd_new_op(None, args)
    host = Host(
        strict=True if args.strict else None,
        builtin_only=getattr(args, "builtin_only", False),
    )
    host.plugins  # noqa: B018 - load now, so strict mode fails before any output
    return int(args.func(host, args))


def error_report(exc: BaseException, code: int) -> dict[str, Any]:
    """The ``--json`` document of a command that failed: its class (``OpRaised`` when the op's
    package raised an untyped exception, named in the message), message, op and exit code."""
    return {
        "schema_version": SCHEMA_VERSION,
        "error": {
            "type": type(exc).__name__,
            "message": str(exc),
            "op": getattr(exc, "op", None),
            "exit_code": code,
        },
    }


def _fail(args: argparse.Namespace, label: str, exc: BaseException, code: int) -> int:
    """Report a failed command, for every command alike: one line on stderr, and under
    ``--json`` the error document on stdout, so a script always reads one JSON document."""
    _say(f"{label}: {exc}")
    if getattr(args, "json", None) is True:  # bench's --json is a path, not this switch
        try:
            print(json.dumps(error_report(exc, code), indent=2))
            sys.stdout.flush()
        except OSError:  # stdout closed or full: the line on stderr said it all
            _detach_stdout()
    return code


def _say(message: str) -> None:
    """One line on stderr (which may itself be closed: then nothing)."""
    with contextlib.suppress(OSError):
        print(f"tenferro-host: {message}", file=sys.stderr)


def _detach_stdout() -> None:
    """Point stdout at /dev/null, as Python's docs advise after EPIPE: the interpreter's own
    flush at exit must not fail again with a traceback."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_OP_RAISED",
    "backend_report",
    "build_parser",
    "caps_report",
    "error_report",
    "main",
    "ops_report",
    "p2p_report",
    "parse_attr",
    "plugins_report",
    "shape_arg",
]

"""Argument types of ``tenferro-host``: shapes, counts, seeds, tolerances, lists, attributes."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ValidationError

N = TypeVar("N", int, float)


def parse_attr(text: str, attributes: dict[str, type], op: str) -> tuple[str, Any]:
    """``NAME=VALUE`` converted to the attribute's declared type: ``int``, ``float``, ``str``
    and ``bool`` from their text; any other type (``object``, ``tuple``...) from a Python
    literal, read with :func:`ast.literal_eval` (never evaluated as code).

    >>> parse_attr("factor=2.5", {"factor": float}, "my_pkg.scale")
    ('factor', 2.5)
    >>> parse_attr("axes=((1,), (0,))", {"axes": object}, "linalg.tensordot")
    ('axes', ((1,), (0,)))
    """
    name, sep, raw = text.partition("=")
    if not sep or name not in attributes:
        raise ValidationError(
            f"--attr {text!r}: use NAME=VALUE with NAME one of "
            f"{', '.join(sorted(attributes)) or '(op has no attributes)'}",
            argument="attr",
            op=op,
        )
    kind = attributes[name]
    if kind not in (bool, int, float, str):
        return name, _literal(name, raw, kind, op)
    try:
        if kind is bool:
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return name, raw.lower() in ("true", "1")
        return name, kind(raw)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"--attr {name}: {raw!r} is not a valid {kind.__name__}", argument="attr", op=op
        ) from exc


def _literal(name: str, raw: str, kind: type, op: str) -> Any:
    """``raw`` as a Python literal of type ``kind`` (any literal for ``object``)."""
    try:
        value = ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValidationError(
            f"--attr {name}: {raw!r} is not a Python literal; write one such as 0, (0, 1), "
            "None or 'text' (quoted inside the shell's quotes)",
            argument="attr",
            op=op,
        ) from exc
    if not isinstance(value, kind):
        raise ValidationError(
            f"--attr {name}: {raw!r} is a {type(value).__name__}, the op declares a "
            f"{kind.__name__}",
            argument="attr",
            op=op,
        )
    return value


def shape_arg(text: str) -> tuple[int, ...]:
    """``1000000``, ``1000,1000`` or ``1000x1000`` as a shape tuple.

    >>> shape_arg("3x4"), shape_arg("10"), shape_arg("0")
    ((3, 4), (10,), (0,))
    """
    parts = text.replace("x", ",").split(",")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; write non-negative sizes like 1000000 or 1000,1000"
        )
    return dims


def _number(text: str, convert: Callable[[str], N], accept: Callable[[N], bool], what: str) -> N:
    """``text`` converted and checked, or the argparse error that names ``what`` it must be."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise argparse.ArgumentTypeError(f"{text!r} {what}")
    return value


def positive_int(text: str) -> int:
    return _number(text, int, lambda v: v >= 1, "is not a positive integer")


def seed_arg(text: str) -> int:
    """A random seed: an integer >= 0 (what numpy's generator takes)."""
    return _number(text, int, lambda v: v >= 0, "is not a seed; use an integer >= 0")


def tolerance_arg(text: str) -> float:
    """A tolerance: a finite number >= 0, e.g. 1e-4."""
    return _number(
        text, float, lambda v: 0 <= v < float("inf"), "is not a tolerance; use a number >= 0"
    )


def list_arg(text: str) -> list[str]:
    """``cpu,webgpu`` as ``["cpu", "webgpu"]``."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give names separated by commas")
    return items


def common_options() -> argparse.ArgumentParser:
    """``--strict`` and ``--json``, shared by the commands that load plugins."""
    return _switches(
        strict="make plugin failures and op name conflicts fatal (also TENFERRO_STRICT_PLUGINS=1)",
        json="print JSON only, for scripts",
    )


def table_options() -> argparse.ArgumentParser:
    """``--wide``, for the commands that print tables."""
    return _switches(
        wide="every column, each row on one line however long (default: fit the terminal)"
    )


def _switches(**helps: str) -> argparse.ArgumentParser:
    """A parent parser of on/off flags: ``--NAME`` for each keyword, with its help."""
    parent = argparse.ArgumentParser(add_help=False)
    for name, help_text in helps.items():
        parent.add_argument(f"--{name}", action="store_true", help=help_text)
    return parent


def tolerance_options() -> argparse.ArgumentParser:
    """``--rtol`` and ``--atol``, shared by ``run`` and ``check``."""
    tolerances = argparse.ArgumentParser(add_help=False)
    tolerances.add_argument(
        "--rtol", type=tolerance_arg, help="relative tolerance (default: the op's declared one)"
    )
    tolerances.add_argument(
        "--atol", type=tolerance_arg, help="absolute tolerance (default: the op's declared one)"
    )
    return tolerances

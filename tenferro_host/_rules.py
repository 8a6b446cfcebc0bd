"""How the host calls an op's rules: ``dtype_rule``, ``shape_rule``, ``reduction_length`` and
a callable ``shapes``.

A rule takes the inputs' dtypes (shapes) positionally, one per input, and as keywords exactly
the declared attributes it names among its parameters (every one when it has ``**kwargs``); a
rule naming none gets none, so ``lambda shape: shape`` works for an op with attributes. Which
ones it names is read once, when the op is declared (:func:`bind`), never per call: a call
only picks them out. A parameter without a default that is neither an input's slot nor a
declared attribute is a ``ValidationError`` there; a rule that raises anything but a typed
error at a call is a ``RuleError`` naming the op and the rule (a bug in the op's package).

>>> rule = bind("shape_rule", lambda shape, axis=0: shape[axis:], ("x",), {"axis": int, "k": int})
>>> rule.takes, rule("my_pkg.tail", [(2, 3, 4)], {"axis": 1, "k": 7})
(frozenset({'axis'}), (3, 4))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import RuleError, TenferroError, ValidationError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class Rule:
    """A rule callable with the attributes it takes (``takes``; None: all of them)."""

    __slots__ = ("fn", "kind", "takes")

    def __init__(self, kind: str, fn: Callable[..., Any], takes: frozenset[str] | None) -> None:
        self.kind = kind
        self.fn = fn
        self.takes = takes

    def __call__(
        self, op: str | None, values: Sequence[Any], attrs: Mapping[str, Any] | None
    ) -> Any:
        """The rule's answer for ``values`` (one per input) and the call's ``attrs``."""
        takes = self.takes
        try:
            if takes is None:
                return self.fn(*values, **attrs) if attrs else self.fn(*values)
            if takes and attrs:
                return self.fn(*values, **{k: v for k, v in attrs.items() if k in takes})
            return self.fn(*values)
        except TenferroError:
            raise  # the rule refusing the call's attributes or inputs, as the contract says
        except Exception as exc:
            of = f" of op {op!r}" if op else ""
            raise RuleError(
                f"the {self.kind} {_named(self.fn)}{of} raised {type(exc).__name__}: {exc}; a "
                "rule must answer every call the op accepts (or raise a typed error such as "
                "ValidationError): this is a bug in the op's package",
                rule=self.kind,
                op=op,
            ) from exc


def bind(
    kind: str,
    fn: Any,
    inputs: Sequence[str],
    attributes: Mapping[str, type],
    op: str | None = None,
) -> Rule:
    """``fn`` as the rule ``kind`` of an op with ``inputs`` and ``attributes``: its first
    ``len(inputs)`` positional parameters are the inputs' slots; a later one named after a
    declared attribute takes it, ``**kwargs`` takes every one, one with a default keeps it
    (``math.prod``'s ``start``), any other is refused. A callable whose parameters cannot be
    read (some builtins) gets the inputs only."""
    where = f"op {op!r}: " if op else ""
    if not callable(fn):
        raise ValidationError(
            f"{where}{kind} must be a callable (dtype_rule and shape_rule may also be 'same'), "
            f"got {type(fn).__name__} {fn!r}",
            argument=kind,
            op=op,
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return Rule(kind, fn, frozenset())
    positional = [p for p in params if p.kind in _POSITIONAL]
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    slots = len(inputs)
    if len(positional) < slots and not variadic:
        raise ValidationError(
            f"{where}{kind} {_named(fn)} takes {len(positional)} positional parameter(s); the "
            f"op has {slots} input(s) ({', '.join(inputs)}), passed to it positionally: give it "
            "one parameter per input",
            argument=kind,
            op=op,
        )
    rest = positional[slots:] + [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    takes = frozenset(p.name for p in rest if p.name in attributes and p.kind in _KEYWORD)
    stray = [p.name for p in rest if p.name not in takes and p.default is p.empty]
    if stray:
        slot = (
            f"neither an input slot (its first {slots} positional parameters) nor "
            if slots
            else "not "
        )
        raise ValidationError(
            f"{where}{kind} {_named(fn)} names {', '.join(map(repr, stray))}, {slot}a declared "
            f"attribute ({', '.join(attributes) or 'none'}), without a default: it can never be "
            "given; declare the attribute in Signature(attributes=...) or drop the parameter",
            argument=kind,
            op=op,
        )
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return Rule(kind, fn, None)
    return Rule(kind, fn, takes)


def _named(fn: Callable[..., Any]) -> str:
    """The rule as a message names it: its name (its type's, for a callable object)."""
    return f"({getattr(fn, '__name__', type(fn).__name__)})"


__all__ = ["Rule", "bind"]

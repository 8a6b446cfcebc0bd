"""What the torch and JAX bridges share for gradients: an op's declared backward, run and checked.

An op is differentiable through a bridge when its ``OpSpec`` declares ``backward`` (see
:class:`~tenferro_host.ops.OpSpec`): ``backward(ops, inputs, outputs, grads, **attributes)``
returns one gradient per input, in JAX's convention (the transpose of the linearization, no
conjugation), written in terms of the framework's exported ops (``ops(name)``). An op without one
raises :func:`no_backward`'s error when a gradient through it is asked for: never a zero or
missing gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UnsupportedError, ValidationError
from ..ops import OpSpec

#: How an op declares its backward, for the error of an op that has none.
HOW_TO_DECLARE = (
    "declare one in its OpSpec: backward=fn, fn(ops, inputs, outputs, grads, **attributes) "
    "returning one gradient per input in terms of other ops (ops(name)); or call it on inputs "
    "that need no gradient (torch: .detach(); JAX: jax.lax.stop_gradient)"
)


def no_backward(op: str, framework: str) -> UnsupportedError:
    """The error of a gradient asked through op ``op``, which declares no backward."""
    return UnsupportedError(
        f"op {op!r} declares no backward, so {framework} cannot differentiate through it; "
        + HOW_TO_DECLARE,
        feature="autograd",
        op=op,
    )


def run_backward(
    spec: OpSpec,
    framework: str,
    ops: Callable[[str], Any],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    grads: Sequence[Any],
    attributes: dict[str, Any],
) -> tuple[Any, ...]:
    """One gradient per input of ``spec``'s op (None for none), from its declared backward."""
    backward = spec.backward
    if backward is None:
        raise no_backward(spec.name, framework)
    got = backward(ops, tuple(inputs), tuple(outputs), tuple(grads), **attributes)
    n = len(spec.signature.inputs)
    if not isinstance(got, (tuple, list)) or len(got) != n:
        count = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
        raise ValidationError(
            f"op {spec.name!r}: backward must return a tuple of {n} gradients, one per input "
            f"({', '.join(spec.signature.inputs)}; None for an input with none), got {count}",
            argument="backward",
            op=spec.name,
        )
    return tuple(got)


__all__ = ["HOW_TO_DECLARE", "no_backward", "run_backward"]

"""Lowering: a parsed kernel body -> typed IR (:mod:`tenferro_host.kernel.ir`).

:func:`lower` type-checks the body of a :class:`~tenferro_host.kernel._frontend.ParsedKernel`
for one set of resolved types and constants (a specialization) and returns a
:class:`~tenferro_host.kernel.ir.KernelIR`. The lowerer is one visitor
(:class:`~._lowerer.Lowerer`: its state, helpers and dispatch) whose handlers come from one
table, :data:`HANDLERS`, keyed by AST node class and by the place and name of a K intrinsic's
call. The handlers are grouped by topic, one module each: expressions (``_expressions``),
calls, atomics, shared arrays and inlined device functions (``_calls``), statements
(``_statements``), subgroup operations (``_subgroup``), matrix fragments (``_matrix``) and
asynchronous copies (``_copies``).

Typing rules (identical on every target):

* Launch indices, ``a.len``, ``a.shape[k]``, ``a.stride[k]`` are ``u32``.
* An untyped literal (``2``, ``0.5``, a ``K.Const[int|float]`` constant, a module-level
  int/float constant) takes the type of the other operand. An int literal becomes a float when
  the other operand is a float; a float literal next to an int operand is a ``DslError`` (cast
  explicitly). An int literal that does not fit the other operand's type is a ``DslError``.
  Two untyped literals fold at compile time with C semantics; a fold with no finite real value
  is a ``DslError``.
* A literal that meets no typed operand (``j = 0``, ``range(10)``) defaults to ``i32`` (ints:
  signed, as in Python) or ``f32`` (floats); literals that meet only each other
  (``K.select(c, 1, 2.5)``) share one type, f32 if any is a float. Write ``K.u32(0)`` or
  ``K.F(0)`` for another type. A float literal cast to an int saturates like a run-time cast.
* Two typed operands of different types never mix: ``DslError`` asking for a cast.
* ``/`` and ``**`` need floats; ``//`` and ``%`` truncate toward zero for ints and floats.
* ``and``/``or``/``not``/``if``/``while`` take bools (compare explicitly); ``and``/``or``
  short-circuit. Chained comparisons ``a < b < c`` mean ``a < b and b < c``.
* A local keeps the type of its first assignment (``x: K.f32 = 0`` declares it). Locals are
  function-scoped, as in Python; the loop variable of ``for`` is read-only inside its loop.
* ``**`` is ``pow`` (floats); an int literal exponent becomes a float of the base's type.

Names in a body resolve to parameters, locals, compile-time constants, then the function's
globals and closure: K names (``K.sqrt``, ``K.ABSOLUTE_POS`` ...), ``range`` and int/float/bool
values (read when the kernel is first specialized; they are not part of the cache key — use
``K.Const`` for values that change). The body is type-checked at specialization, when the
argument types are known; the signature is checked at decoration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...dtypes import DType
from .. import ir
from .._frontend import ParsedKernel
from . import _calls, _copies, _expressions, _matrix, _statements, _subgroup
from ._lowerer import Lowerer, join_tables

__all__ = ["lower"]

HANDLERS = join_tables(
    _expressions.HANDLERS,
    _calls.HANDLERS,
    _statements.HANDLERS,
    _subgroup.HANDLERS,
    _matrix.HANDLERS,
    _copies.HANDLERS,
)
"""Every handler of the lowerer, by AST node class and intrinsic call place."""


def lower(
    parsed: ParsedKernel,
    generics: Mapping[str, DType],
    params: tuple[ir.Param, ...],
    constants: Mapping[str, Any],
) -> ir.KernelIR:
    """Type-check ``parsed``'s body for the given resolved parameters and constants."""
    lowerer = Lowerer(HANDLERS, parsed, generics, params, constants)
    lowerer.top_level = {id(s) for s in parsed.func.body}
    body = lowerer.block(parsed.func.body)
    return ir.KernelIR(
        name=parsed.name,
        filename=parsed.filename,
        params=params,
        locals=tuple(lowerer.decls.items()),
        body=body,
        written=frozenset(lowerer.written),
        shared=tuple(lowerer.shared),
        registers=tuple(lowerer.registers),
        atomic=frozenset(lowerer.atomic),
    )

"""Which unit of a warp holds which element of an m16n8k16 fragment (PTX ``mma.m16n8k16``'s
register layout), and which row each unit hands ``ldmatrix``.

The formulas are written once over :data:`Index`: Python ints (tests evaluate them lane by
lane against PTX's documented layout and ``ldmatrix``'s rule) or :class:`CExpr`, the CUDA C
the emitter writes with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, Union

from tenferro_host.kernel import ir


@dataclass(frozen=True)
class CExpr:
    """An unsigned C expression; ``+ * & >>`` with another or an int give the C of the
    operation (ints as ``u`` literals), so a formula over ints is also one over C."""

    text: str

    def _op(self, op: str, other: Index, right: bool = False) -> CExpr:
        o = other.text if isinstance(other, CExpr) else f"{other}u"
        return CExpr(f"({o} {op} {self.text})" if right else f"({self.text} {op} {o})")

    def __add__(self, other: Index) -> CExpr:
        return self._op("+", other)

    def __radd__(self, other: int) -> CExpr:
        return self._op("+", other, right=True)

    def __mul__(self, other: Index) -> CExpr:
        return self._op("*", other)

    def __rmul__(self, other: int) -> CExpr:
        return self._op("*", other, right=True)

    def __and__(self, other: int) -> CExpr:
        return self._op("&", other)

    def __rshift__(self, other: int) -> CExpr:
        return self._op(">>", other)


Index = Union[int, CExpr]  # noqa: UP007 - a runtime alias: the operators' annotations use it
I = TypeVar("I", int, CExpr)  # noqa: E741


def transposed(t: ir.FragmentType) -> bool:
    """Whether ``ldmatrix`` loads ``t`` with ``.trans``: PTX's registers hold ``a`` by rows and
    ``b`` by columns, so an ``a`` stored by columns or a ``b`` stored by rows is transposed."""
    return (t.use == "a") == (t.layout == "col")


def ldmatrix_row(t: ir.FragmentType, lane: I, ld: I) -> I:
    """The offset from the fragment's start of the 8-element row ``lane`` hands ``ldmatrix``
    (lanes ``8q .. 8q + 7``: the rows of matrix ``q``, whose registers are the fragment's
    register ``q``)."""
    matrix, row = lane >> 3, lane & 7
    if t.use == "a" and t.layout == "row":  # matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15)
        return (lane & 15) * ld + (lane >> 4) * 8
    if t.use == "a":  # stored rows are k: matrix q at rows 8 (q & 1), k 8 (q >> 1)
        return (matrix & 1) * 8 + (row + (matrix >> 1) * 8) * ld
    if t.layout == "col":  # b by columns: stored rows are n, k 0-7 | 8-15
        return (matrix & 1) * 8 + row * ld
    return (row + (matrix & 1) * 8) * ld  # b by rows: stored rows k 0-7 | 8-15


def register_element(t: ir.FragmentType, register: int, half: int, lane: I) -> tuple[I, I]:
    """``(i, j)`` of the element in half ``half`` (low 16 bits: 0) of register ``register`` of
    unit ``lane``: row ``g = lane / 4`` (+ 8), columns ``2 (lane % 4)`` and the next; ``a``
    register ``r`` row ``g + 8 (r & 1)``, columns ``+ 8 (r >> 1)``; ``b`` register ``r`` rows
    (k) ``+ 8 r`` of column ``g``; an accumulator register ``r`` (one f32, ``half`` 0) row
    ``g + 8 (r >> 1)``, column ``+ (r & 1)``."""
    group, pair = lane >> 2, (lane & 3) * 2
    if t.use == "a":
        return group + 8 * (register & 1), pair + (8 * (register >> 1) + half)
    if t.use == "b":
        return pair + (8 * register + half), group
    return group + 8 * (register >> 1), pair + (register & 1)


def position(t: ir.FragmentType, i: I, j: I, ld: I) -> I:
    """Offset from the fragment's start of element ``(i, j)`` in ``t``'s layout."""
    return i * ld + j if t.layout == "row" else i + j * ld


__all__ = ["CExpr", "Index", "ldmatrix_row", "position", "register_element", "transposed"]

"""Matrix fragments: the IR of a warp's matrix-multiply-accumulate (tensor cores on CUDA).

A *fragment* is an ``m x k`` (use ``a``), ``k x n`` (use ``b``) or ``m x n`` (use
``accumulator``) tile of a matrix held together by the :data:`WARP` units of one warp: units
``32w .. 32w + 31`` of a cube (by ``UNIT_POS``). Which unit holds which element is the target's
business; the program only fills, loads, stores and multiplies whole fragments, and every unit
of the warp takes part in each of those statements with the same operands (as in CUDA's
``wmma``; the interpreter checks it).

Numbers: ``a``/``b`` fragments hold f16, accumulators f32. ``mma`` computes
``d[i, j] = c[i, j] + sum_k a[i, k] * b[k, j]``; each product of two f16 is exact in f32, so the
only rounding is the f32 sum. The interpreter and WebGPU add the ``k`` products to ``c[i, j]``
one at a time in increasing ``k`` (identical results); tensor cores add them in an order of
their own (and may keep wider partial sums), so CUDA may differ from them by the rounding of
a ``k``-term f32 sum: at most ``k * 2^-24 * sum_k |a[i, k] * b[k, j]|`` plus ``|c|``'s ulp.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ...dtypes import DType
from ...errors import InvalidLaunchConfigError
from ._node_base import Expr, Node, Stmt, walk

if TYPE_CHECKING:
    from ._nodes import KernelIR

T = TypeVar("T")

WARP = 32
"""Units of a warp: the units that hold one fragment together."""

USES = ("a", "b", "accumulator")
LAYOUTS = ("row", "col")
MMA_SHAPE = (16, 8, 16)
"""``(m, n, k)`` of the tensor cores' own instruction (PTX ``mma.sync`` m16n8k16): the fast
shape on CUDA, whose fragments load from shared memory with ``ldmatrix``."""
SHAPES: tuple[tuple[int, int, int], ...] = ((16, 16, 16), (32, 8, 16), (8, 32, 16), MMA_SHAPE)
"""``(m, n, k)`` of the fragments every target supports (WMMA's f16 shapes and
:data:`MMA_SHAPE`)."""
FRAGMENT_ARRAY_MAX = 64
"""Fragments one ``K.fragment`` array may hold: each is registers of every unit of a warp
(64 m16n8k16 accumulators are 256 registers, all a unit has)."""
ELEMENT = {"a": "float16", "b": "float16", "accumulator": "float32"}
"""The element type of each use of fragment."""


@dataclass(frozen=True)
class FragmentType:
    """A fragment's use, ``(m, n, k)`` shape, element type and the layout its loads and stores
    read memory in (``row``: element ``(i, j)`` at ``i * ld + j``; ``col``: ``i + j * ld``)."""

    use: str
    m: int
    n: int
    k: int
    dtype: DType
    layout: str

    @property
    def rows(self) -> int:
        return self.k if self.use == "b" else self.m

    @property
    def cols(self) -> int:
        return self.k if self.use == "a" else self.n

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)


@dataclass(frozen=True)
class FragmentFill(Stmt):
    """``K.fill_fragment(f, value)``: every element of ``f`` becomes ``value`` (its type)."""

    fragment: str
    ftype: FragmentType
    value: Expr


@dataclass(frozen=True)
class FragmentLoad(Stmt):
    """``K.load_fragment(f, array, start, ld)``: element ``(i, j)`` of ``f`` is element
    ``start + i * ld + j`` (row layout) or ``start + i + j * ld`` (col) of ``array``'s storage
    from the view's offset (a compact view or a shared array); ``start``, ``ld`` u32."""

    fragment: str
    ftype: FragmentType
    array: str
    start: Expr
    ld: Expr


@dataclass(frozen=True)
class FragmentStore(Stmt):
    """``K.store_fragment(array, start, f, ld)``: the inverse of :class:`FragmentLoad`."""

    array: str
    start: Expr
    ld: Expr
    fragment: str
    ftype: FragmentType


@dataclass(frozen=True)
class Mma(Stmt):
    """``K.mma(d, a, b, c)``: ``d = a @ b + c`` (``d`` may be ``c``); see the module
    docstring for the accumulation order. ``*type`` are the four fragments' types."""

    d: str
    a: str
    b: str
    c: str
    dtype: FragmentType
    atype: FragmentType
    btype: FragmentType
    ctype: FragmentType


MATRIX_STATEMENTS: tuple[type[Stmt], ...] = (FragmentFill, FragmentLoad, FragmentStore, Mma)


def fragments(body: tuple[Node, ...]) -> Iterator[tuple[str, FragmentType]]:
    """Each fragment of a kernel body with its type, once, in order of first use (targets
    declare them at function entry)."""
    seen: set[str] = set()
    for node in walk(body):
        named: tuple[tuple[str, FragmentType], ...] = ()
        if isinstance(node, (FragmentFill, FragmentLoad, FragmentStore)):
            named = ((node.fragment, node.ftype),)
        elif isinstance(node, Mma):
            named = ((node.a, node.atype), (node.b, node.btype), (node.c, node.ctype))
            named += ((node.d, node.dtype),)
        for name, ftype in named:
            if name not in seen:
                seen.add(name)
                yield name, ftype


def check_fragment_cube(kernel: KernelIR, units: int) -> None:
    """Refuse a launch whose cubes are not whole warps when the kernel uses fragments (on a GPU
    the last warp's fragments would be undefined)."""
    if units % WARP and kernel.fragments:
        raise InvalidLaunchConfigError(
            f"kernel {kernel.name!r} uses matrix fragments, which warps of {WARP} units hold "
            f"together; this launch's cubes have {units} units: launch a multiple of {WARP} "
            "units per cube",
            argument="dim",
        )


def fragment_alignment(ftype: FragmentType) -> tuple[int, int]:
    """In elements: what a fragment's first element's position in its memory (the storage of
    an array, which starts 256-byte aligned, or a shared array) and its leading dimension must
    be multiples of: 32 and 16 bytes, as ``wmma`` reads them; 16 and 16 for m16n8k16, whose
    loads read 16-byte rows (``ldmatrix``). The interpreter checks it, so a kernel it runs also
    runs on CUDA (WGSL would not mind)."""
    start = 16 if ftype.shape == MMA_SHAPE else 32
    return start // ftype.dtype.itemsize, 16 // ftype.dtype.itemsize


def element_position(ftype: FragmentType, i: T, j: T) -> tuple[T, T]:
    """``(p, q)`` such that element ``(i, j)`` of a fragment of type ``ftype`` is at
    ``start + p * ld + q`` in memory."""
    return (i, j) if ftype.layout == "row" else (j, i)

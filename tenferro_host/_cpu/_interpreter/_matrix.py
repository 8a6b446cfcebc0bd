"""The interpreter's matrix fragments: each warp's fragments as numpy tiles, with the checks a
GPU skips (:mod:`tenferro_host.kernel.ir._matrix` states the semantics).

A fragment statement is a warp's: all :data:`~.ir.WARP` units of each warp that reaches it take
part, with equal operands (:class:`DivergentFragmentError` otherwise), and a fragment is read
(``mma``, a store) only after its warp filled or loaded it (:class:`UnwrittenFragmentError`).
Each element a fragment load or store touches counts as touched by several units (which unit
moves which element is the target's business), so the shared-memory race rule treats it as
conservatively as a GPU requires: a barrier between a store and any other unit's access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ... import ValidationError
from ...kernel import DivergentFragmentError, UnwrittenFragmentError, ir
from ._shared import MANY

if TYPE_CHECKING:
    from ._machine import ArrayArg
    from ._shared import SharedState

Lanes = np.ndarray[Any, Any]


class MatrixMachine:
    """The fragment statements of the interpreter's machine (a base of it)."""

    if TYPE_CHECKING:
        n: int
        per_cube: int
        kernel: ir.KernelIR
        arrays: dict[str, ArrayArg]
        shared: dict[str, SharedState]

        def fail(
            self,
            node: ir.Node,
            message: str,
            lanes: Lanes,
            argument: str | None = None,
            error: type[ValidationError] = ValidationError,
        ) -> ValidationError: ...
        def expr(self, e: ir.Expr, *args: Any) -> Any: ...
        def lanes(self, value: Any) -> Lanes: ...
        def address(self, node: ir.Node, name: str, index: Any, active: Lanes) -> Lanes: ...
        def shared_access(
            self, node: ir.Node, kind: str, name: str, index: Any, active: Lanes
        ) -> Lanes: ...

    _tiles: dict[str, tuple[Lanes, Lanes]] | None = None

    def tile(self, name: str, ftype: ir.FragmentType) -> tuple[Lanes, Lanes]:
        """Fragment ``name`` of every warp (``(warps, rows, cols)``) and whether each warp has
        written it."""
        if self._tiles is None:
            self._tiles = {}
        found = self._tiles.get(name)
        if found is None:
            warps = self.n // ir.WARP
            data = np.zeros((warps, ftype.rows, ftype.cols), ftype.dtype.numpy)
            found = self._tiles[name] = (data, np.zeros(warps, bool))
        return found

    def taking_part(self, s: ir.Stmt, active: Lanes) -> tuple[Lanes, Lanes]:
        """The warps that run ``s`` (bool per warp) and their lanes (bool per lane), after the
        rule that a warp runs it whole."""
        ir.check_fragment_cube(self.kernel, self.per_cube)
        count = active.reshape(-1, ir.WARP).sum(axis=1)
        partial = (count > 0) & (count < ir.WARP)
        if partial.any():
            w = int(np.flatnonzero(partial)[0])
            raise self.fail(
                s,
                f"a fragment statement is reached by {count[w]} of the {ir.WARP} units of a "
                "warp: every unit of a warp runs each fragment statement together (it is inside "
                "control flow that divides the warp); make the condition the same for the "
                f"{ir.WARP} units of each warp",
                active & (np.arange(self.n) // ir.WARP == w),
                error=DivergentFragmentError,
            )
        warps = count == ir.WARP
        return warps, np.repeat(warps, ir.WARP)

    def uniform(self, s: ir.Stmt, e: ir.Expr, what: str, warps: Lanes, lanes: Lanes) -> Lanes:
        """The value of ``e`` per warp taking part: one value for all units of a warp."""
        values = self.lanes(self.expr(e, lanes)).reshape(-1, ir.WARP)[warps]
        differ = (values != values[:, :1]).any(axis=1)
        if values.dtype.kind == "f":  # a NaN fill value is one value
            differ &= ~np.isnan(values).all(axis=1)
        if differ.any():
            w = int(np.flatnonzero(warps)[np.flatnonzero(differ)[0]])
            raise self.fail(
                s,
                f"the {what} of a fragment statement differs between the units of a warp; "
                "give every unit of the warp the same value",
                lanes & (np.arange(self.n) // ir.WARP == w),
                error=DivergentFragmentError,
            )
        return values[:, 0]

    def read_tile(self, s: ir.Stmt, name: str, ftype: ir.FragmentType, warps: Lanes) -> Lanes:
        data, written = self.tile(name, ftype)
        unwritten = warps & ~written
        if unwritten.any():
            w = int(np.flatnonzero(unwritten)[0])
            raise self.fail(
                s,
                f"fragment {name!r} is used before its warp filled or loaded it "
                "(fragments start undefined); K.fill_fragment or K.load_fragment it first",
                np.arange(self.n) // ir.WARP == w,
                error=UnwrittenFragmentError,
            )
        return data[warps]

    def write_tile(self, name: str, ftype: ir.FragmentType, warps: Lanes, value: Any) -> None:
        data, written = self.tile(name, ftype)
        data[warps] = value
        written[warps] = True

    def positions(
        self, s: ir.FragmentLoad | ir.FragmentStore, kind: str, warps: Lanes, lanes: Lanes
    ) -> Lanes:
        """Positions in the array's memory (storage, or shared data) of every element of the
        fragment, ``(warps, rows, cols)``, after the bounds (and shared-memory) checks."""
        ftype = s.ftype
        start = self.uniform(s, s.start, "start", warps, lanes).astype(np.int64)
        ld = self.uniform(s, s.ld, "leading dimension", warps, lanes).astype(np.int64)
        shared = self.shared.get(s.array)
        base = start + (0 if shared is not None else self.arrays[s.array].offset)
        step, ld_step = ir.fragment_alignment(ftype)
        misaligned = (base % step != 0) | (ld % ld_step != 0)
        if misaligned.any():
            w = int(np.flatnonzero(warps)[np.flatnonzero(misaligned)[0]])
            raise self.fail(
                s,
                f"a fragment of {s.array!r} starts at element {base[misaligned][0]} of its "
                f"memory with leading dimension {ld[misaligned][0]}: {ftype.m}x{ftype.n}x"
                f"{ftype.k} fragments start at a multiple of {step} elements "
                f"({step * ftype.dtype.itemsize} bytes) and step rows or columns by a multiple "
                f"of {ld_step} elements (16 bytes), as tensor cores read them",
                lanes & (np.arange(self.n) // ir.WARP == w),
                argument=s.array,
            )
        start, ld = np.repeat(start, ir.WARP), np.repeat(ld, ir.WARP)
        nwarps, count = int(warps.sum()), ftype.rows * ftype.cols
        out = np.empty((nwarps, count), np.int64)
        unit = np.arange(nwarps * ir.WARP) % ir.WARP
        for chunk in range(count // ir.WARP):  # each unit moves one element per chunk
            element = chunk * ir.WARP + unit
            p, q = ir.element_position(ftype, *np.divmod(element, ftype.cols))
            index = np.zeros(self.n, np.int64)
            index[lanes] = start + p * ld + q
            if shared is None:
                pos = self.address(s, s.array, index, lanes)
            else:
                pos = self.shared_access(s, kind, s.array, index, lanes)
                shared.access[kind][pos] = MANY
            out[:, chunk * ir.WARP : (chunk + 1) * ir.WARP] = pos.reshape(nwarps, ir.WARP)
        return out.reshape(nwarps, ftype.rows, ftype.cols)

    def memory(self, array: str) -> Lanes:
        shared = self.shared.get(array)
        return self.arrays[array].storage if shared is None else shared.data

    # -------------------------------------------------------- statements

    def visit_FragmentFill(self, s: ir.FragmentFill, active: Lanes) -> None:
        warps, lanes = self.taking_part(s, active)
        value = self.uniform(s, s.value, "fill value", warps, lanes)
        self.write_tile(s.fragment, s.ftype, warps, value[:, None, None])

    def visit_FragmentLoad(self, s: ir.FragmentLoad, active: Lanes) -> None:
        warps, lanes = self.taking_part(s, active)
        pos = self.positions(s, "read", warps, lanes)
        self.write_tile(s.fragment, s.ftype, warps, self.memory(s.array)[pos])

    def visit_FragmentStore(self, s: ir.FragmentStore, active: Lanes) -> None:
        warps, lanes = self.taking_part(s, active)
        value = self.read_tile(s, s.fragment, s.ftype, warps)
        pos = self.positions(s, "write", warps, lanes)
        self.memory(s.array)[pos] = value

    def visit_Mma(self, s: ir.Mma, active: Lanes) -> None:
        """``d = c + a @ b``: the products (exact in f32) added to ``c`` one ``k`` at a time."""
        warps, _ = self.taking_part(s, active)
        a = self.read_tile(s, s.a, s.atype, warps).astype(np.float32)
        b = self.read_tile(s, s.b, s.btype, warps).astype(np.float32)
        acc = self.read_tile(s, s.c, s.ctype, warps).copy()
        for k in range(s.atype.k):
            acc += a[:, :, k, None] * b[:, None, k, :]
        self.write_tile(s.d, s.dtype, warps, acc)

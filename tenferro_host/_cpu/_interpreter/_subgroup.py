"""The interpreter's subgroup operations: every subgroup in lock-step, with the checking rule
that all units of a subgroup take part (:class:`DivergentSubgroupError` otherwise, as
``K.sync_cube()`` has :class:`DivergentBarrierError`).

A cube's units form subgroups of ``subgroup_size`` consecutive units (``UNIT_POS`` order; the
last may be partial). Values are laid out one row per subgroup, so each operation is a few numpy
operations over the whole launch. Reductions follow the xor butterfly CUDA runs (see
:class:`~tenferro_host.kernel.ir.SubgroupReduce`), so float sums round as on CUDA.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import InvalidLaunchConfigError, ValidationError
from ...kernel import DivergentSubgroupError, ir
from ._numerics import FLOAT_OPS, INT_OPS, math_func

DEFAULT_SUBGROUP_SIZE = 32
"""The interpreter's subgroup size unless a launch names another (CUDA's warp)."""

MAX_SUBGROUP_SIZE = ir.MAX_SUBGROUP_SIZE


def check_subgroup_size(size: int) -> None:
    """A subgroup size is a power of two from 1 to :data:`MAX_SUBGROUP_SIZE`."""
    if not (1 <= size <= MAX_SUBGROUP_SIZE and size & (size - 1) == 0):
        raise InvalidLaunchConfigError(
            f"subgroup size {size} is not a power of two from 1 to {MAX_SUBGROUP_SIZE}; "
            "pass 32 (CUDA's warp) or the adapter's subgroup size",
            argument="subgroup_size",
        )


class SubgroupMachine:
    """The subgroup half of the interpreter's machine (mixed into it): ``n`` lanes, ``ncubes``
    cubes of ``per_cube`` units, ``unit_of``/``cube_of`` per lane and ``fail`` come from it."""

    n: int
    ncubes: int
    per_cube: int
    unit_of: np.ndarray[Any, Any]
    cube_of: np.ndarray[Any, Any]
    subgroup_size: int

    if TYPE_CHECKING:  # the machine's own

        def fail(self, *args: Any, **kwargs: Any) -> ValidationError: ...
        def expr(self, e: ir.Expr, *args: Any) -> Any: ...
        def lanes(self, value: Any) -> np.ndarray[Any, Any]: ...

    # -------------------------------------------------------- layout

    @cached_property
    def _slot(self) -> np.ndarray[Any, Any]:
        """Each lane's position in the (subgroup, lane) rows: whole rows per cube."""
        rows = -(-self.per_cube // self.subgroup_size)
        return self.cube_of * rows * self.subgroup_size + self.unit_of

    @cached_property
    def _lane(self) -> np.ndarray[Any, Any]:
        return self.unit_of % self.subgroup_size

    @cached_property
    def _members(self) -> np.ndarray[Any, Any]:
        """Units in each lane's subgroup (the last of a cube may be partial)."""
        size = self.subgroup_size
        return np.minimum(size, self.per_cube - (self.unit_of // size) * size)

    def _rows(self, values: Any, fill: Any) -> np.ndarray[Any, Any]:
        """``values`` (one per lane) as one row per subgroup, ``fill`` where no unit is."""
        lanes = self.lanes(values)
        total = (self._slot[-1] // self.subgroup_size + 1) * self.subgroup_size
        out = np.full(int(total), fill, dtype=lanes.dtype)
        out[self._slot] = lanes
        return out.reshape(-1, self.subgroup_size)

    def _converged(self, e: ir.Expr, active: np.ndarray[Any, Any]) -> None:
        """The checking rule: each subgroup takes part whole or not at all."""
        taking = self._rows(active, False).sum(axis=1)
        members = self._rows(self._members, 0).max(axis=1)
        partial = (taking > 0) & (taking < members)
        if partial.any():
            row = int(np.flatnonzero(partial)[0])
            rows_per_cube = -(-self.per_cube // self.subgroup_size)
            cube, group = divmod(row, rows_per_cube)
            lanes = active & (self._slot // self.subgroup_size == row)
            raise self.fail(
                e,
                f"a subgroup operation is reached by {taking[row]} of the {members[row]} units of "
                f"subgroup {group} of cube {cube} (subgroup size {self.subgroup_size}): every "
                "unit of a subgroup must take part (it is inside control flow that diverges "
                "within the subgroup, or some units returned before it); move it out of the "
                "branch, or let the whole subgroup run it",
                lanes,
                error=DivergentSubgroupError,
            )

    # -------------------------------------------------------- nodes

    def visit_SubgroupFact(self, e: ir.SubgroupFact, active: np.ndarray[Any, Any]) -> Any:
        if e.name == "SUBGROUP_SIZE":
            return np.uint32(self.subgroup_size)
        return self._lane.astype(np.uint32)

    def visit_SubgroupReduce(self, e: ir.SubgroupReduce, active: np.ndarray[Any, Any]) -> Any:
        self._converged(e, active)
        rows = self._rows(self.expr(e.value, active), 0).astype(e.type.numpy)
        present = self._rows(np.ones(self.n, bool), False)
        lane = np.arange(self.subgroup_size)
        offset = 1
        while offset < self.subgroup_size:
            partner = lane ^ offset
            combined = self._combine(e, rows, rows[:, partner])
            rows = np.where(present[:, partner], combined, rows)
            offset *= 2
        return rows[:, 0][self._slot // self.subgroup_size]

    @staticmethod
    def _combine(e: ir.SubgroupReduce, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> Any:
        if e.op != "add":
            return math_func(e.op, [a, b], e.type)
        ops = FLOAT_OPS if e.type.is_float else INT_OPS
        return np.asarray(ops["add"](a, b)).astype(e.type.numpy, copy=False)

    def visit_SubgroupShuffle(self, e: ir.SubgroupShuffle, active: np.ndarray[Any, Any]) -> Any:
        self._converged(e, active)
        value = self.lanes(self.expr(e.value, active))
        lane = self.lanes(self.expr(e.lane, active)).astype(np.int64)
        source = lane if e.mode == "index" else self._lane ^ lane
        bad = active & (source >= self._members)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            what = "lane" if e.mode == "index" else f"lane {self._lane[k]} ^ mask"
            raise self.fail(
                e,
                f"the shuffle reads {what} {source[k]}, which is not a unit of its subgroup "
                f"(it has {self._members[k]}): a shuffle reads a lane below the subgroup's "
                "unit count",
                bad,
            )
        rows = self._rows(value, 0)
        row = self._slot // self.subgroup_size
        out = np.zeros(self.n, e.type.numpy)
        out[active] = rows[row[active], source[active]]
        return out

    def visit_SubgroupBallot(self, e: ir.SubgroupBallot, active: np.ndarray[Any, Any]) -> Any:
        self._converged(e, active)
        cond = self._rows(self.lanes(self.expr(e.cond, active)) & active, False)
        width = min(self.subgroup_size, ir.BALLOT_BITS)
        words = cond.reshape(cond.shape[0], -1, width).astype(np.uint64)
        bits = (words << np.arange(width, dtype=np.uint64)).sum(axis=2).astype(np.uint32)
        row = self._slot // self.subgroup_size
        return bits[row, self._lane // width]

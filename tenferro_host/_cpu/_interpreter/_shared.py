"""The interpreter's shared memory: each cube's shared arrays with who touched each element
since the last barrier, and the checks of every access (bounds, a read of an unwritten
element, a race) and of every barrier (all units of a cube reach it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import ValidationError
from ...kernel import (
    DivergentBarrierError,
    SharedRaceError,
    UnwaitedCopyError,
    UnwrittenSharedReadError,
    ir,
)

Lanes = np.ndarray[Any, Any]

NONE, MANY = -1, -2


class SharedState:
    """One shared array of every cube, with who touched each element since the last barrier:
    ``-1`` nobody, ``-2`` several units, else the unit; and the line of that access."""

    def __init__(self, decl: ir.SharedArray, size: int, ncubes: int) -> None:
        self.decl = decl
        self.size = size  # elements per cube: the declared size, or the launch's
        self.shape = (size,) if decl.size_param is not None else decl.shape  # sized: 1-D
        n = ncubes * size
        self.data = np.zeros(n, decl.dtype.numpy)
        self.written = np.zeros(n, bool)
        self.access = {kind: np.full(n, NONE, np.int64) for kind in ("write", "read", "atomic")}
        self.lines = {kind: np.zeros(n, np.int64) for kind in ("write", "read", "atomic")}
        #: per element, the lane whose asynchronous copy still fills it (NONE: none), the
        #: copy's group (that lane's commit count when it started) and line
        self.pending = np.full(n, NONE, np.int64)
        self.pending_group = np.zeros(n, np.int64)
        self.pending_line = np.zeros(n, np.int64)

    def reset(self, cubes: np.ndarray[Any, Any]) -> None:
        """A barrier of ``cubes`` (bool per cube) ends their accesses' epoch."""
        for state in self.access.values():
            state.reshape(-1, self.size)[cubes] = NONE

    def record(
        self, kind: str, key: np.ndarray[Any, Any], units: np.ndarray[Any, Any], line: int
    ) -> None:
        """Merge an access by ``units`` of elements ``key`` (keys may repeat)."""
        state = self.access[kind]
        uniq, inverse = np.unique(key, return_inverse=True)
        lo = np.full(len(uniq), np.iinfo(np.int64).max)
        hi = np.full(len(uniq), -1)
        np.minimum.at(lo, inverse, units)
        np.maximum.at(hi, inverse, units)
        old = state[uniq]
        single = lo == hi
        merged = np.where(single & ((old == NONE) | (old == lo)), lo, MANY)
        state[uniq] = merged
        self.lines[kind][uniq] = line


def several_units(key: np.ndarray[Any, Any], units: np.ndarray[Any, Any]) -> Any:
    """Per access: whether another unit accesses the same key in this statement."""
    order = np.lexsort((units, key))
    k, u = key[order], units[order]
    differ = (k[1:] == k[:-1]) & (u[1:] != u[:-1])
    return np.isin(key, k[1:][differ])


#: How a race message names the two accesses.
PAST = {"write": "wrote", "read": "read", "atomic": "updated (atomically)"}
PRESENT = {"write": "writes", "read": "reads", "atomic": "updates (atomically)"}


#: The accesses each kind of access races with (atomics among themselves do not race).
CONFLICTS = {
    "read": ("write", "atomic"),
    "atomic": ("write", "read"),
    "write": ("write", "read", "atomic"),
}


def first_clash(
    state: SharedState, kind: str, key: Lanes, units: Lanes
) -> tuple[Lanes, str] | None:
    """The accesses of ``kind`` to elements ``key`` by ``units`` that race (with another unit's
    access since the last barrier, or for a write with another unit's write in the same
    statement), and what the other access was; None when none races."""
    for other in CONFLICTS[kind]:
        seen = state.access[other][key]
        clash = (seen != NONE) & (seen != units)
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            by = "several units" if seen[k] == MANY else f"unit {seen[k]}"
            return clash, f"{by} {PAST[other]} it at line {state.lines[other][key[k]]}"
    if kind == "write":
        clash = several_units(key, units)
        if clash.any():
            return clash, "another unit writes it in the same statement"
    return None


class SharedMachine:
    """The shared-memory half of the interpreter's machine (mixed into it): ``n`` lanes,
    ``ncubes`` cubes of ``per_cube`` units, ``unit_of``/``cube_of`` per lane, ``shared`` and
    ``fail`` come from it."""

    n: int
    ncubes: int
    per_cube: int
    unit_of: Lanes
    cube_of: Lanes
    shared: dict[str, SharedState]

    if TYPE_CHECKING:  # the machine's own

        def fail(self, *args: Any, **kwargs: Any) -> ValidationError: ...
        def lanes(self, value: Any) -> Lanes: ...

    def visit_SyncCube(self, s: ir.SyncCube, active: np.ndarray[Any, Any]) -> None:
        arrived = np.bincount(self.cube_of[active], minlength=self.ncubes)
        partial = (arrived > 0) & (arrived < self.per_cube)
        if partial.any():
            cube = int(np.flatnonzero(partial)[0])
            lanes = active & (self.cube_of == cube)
            raise self.fail(
                s,
                f"K.sync_cube() is reached by {arrived[cube]} of the {self.per_cube} units of "
                f"cube {cube}: every unit of a cube must reach the same barrier (it is inside "
                "divergent control flow, or some units returned before it); move it out of "
                "the branch, or let every unit run the branch",
                lanes,
                error=DivergentBarrierError,
            )
        done = arrived == self.per_cube
        for state in self.shared.values():
            state.reset(done)

    def shared_access(
        self, node: ir.Node, kind: str, name: str, index: Any, active: np.ndarray[Any, Any]
    ) -> np.ndarray[Any, Any]:
        """Flat positions in ``name``'s storage of an access by the active lanes, after the
        bounds, initialisation and race checks; records the access."""
        state = self.shared[name]
        size = state.size
        idx = self.lanes(index)[active]
        where = np.flatnonzero(active)
        bad = (idx < 0) | (idx >= size)
        if bad.any():
            raise self.refuse(
                node,
                where,
                bad,
                lambda k: (
                    f"index {idx[k]} of shared array {name!r} is out of bounds "
                    f"(it has {size} elements)"
                ),
            )
        units = self.unit_of[where]
        key = self.cube_of[where] * size + idx.astype(np.int64)
        filling = state.pending[key]
        if (filling != NONE).any():
            raise self.refuse(
                node,
                where,
                filling != NONE,
                lambda k: (
                    f"{PRESENT[kind]} element {idx[k]} of shared array {name!r}, which an "
                    f"asynchronous copy (line {state.pending_line[key[k]]}) of unit "
                    f"{self.unit_of[filling[k]]} still fills: that unit must "
                    "K.commit_copies() and K.wait_copies(n) for it first (then K.sync_cube() "
                    "before other units touch it)"
                ),
                UnwaitedCopyError,
            )
        if kind != "write":
            unwritten = ~state.written[key]
            if unwritten.any():
                raise self.refuse(
                    node,
                    where,
                    unwritten,
                    lambda k: (
                        f"reads element {idx[k]} of shared array {name!r}, which no unit "
                        f"of cube {self.cube_of[where[k]]} has written (shared memory starts "
                        "uninitialised); write it first, then K.sync_cube()"
                    ),
                    UnwrittenSharedReadError,
                )
        found = first_clash(state, kind, key, units)
        if found is not None:
            clash, other = found
            raise self.refuse(
                node,
                where,
                clash,
                lambda k: (
                    f"shared-memory race on {name}[{idx[k]}] in cube "
                    f"{self.cube_of[where[k]]}: unit {units[k]} {PRESENT[kind]} it while {other}, "
                    "with no K.sync_cube() between; put a barrier between the two accesses (or use "
                    "atomics for both)"
                ),
                SharedRaceError,
            )
        if kind == "write":
            state.written[key] = True
        state.record(kind, key, units, node.line)
        return key

    def refuse(
        self,
        node: ir.Node,
        where: Lanes,
        bad: Lanes,
        message: Callable[[int], str],
        error: type[ValidationError] = ValidationError,
        argument: str | None = None,
    ) -> ValidationError:
        """``error`` for the first of the accesses ``bad`` (over the accessing lanes ``where``):
        ``message(k)`` says what access ``k`` did; ``argument`` names the array argument."""
        k = int(np.flatnonzero(bad)[0])
        return self.fail(node, message(k), self._lanes_of(where[bad]), argument, error)

    def _lanes_of(self, where: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        lanes = np.zeros(self.n, bool)
        lanes[where] = True
        return lanes

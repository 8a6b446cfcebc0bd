"""The checking interpreter's cooperation rules: the errors it raises, and the record of which
unit touched each shared element since the last barrier."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ValidationError
from . import ir


class CooperationError(ValidationError):
    """A cube's units misuse shared memory or barriers (detected by the interpreter)."""


class DivergentBarrierError(CooperationError):
    """``K.sync_cube()`` reached by some but not all units of a cube."""


class SharedRaceError(CooperationError):
    """Two units touch one shared element between barriers and one of them writes."""


class UnwrittenSharedReadError(CooperationError):
    """A read (or atomic) of a shared element no unit of the cube has written."""


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


class DivergentSubgroupError(CooperationError):
    """A subgroup operation reached by some but not all units of a subgroup."""

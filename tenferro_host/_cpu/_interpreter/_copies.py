"""The interpreter's asynchronous copies: each copy moves its elements at once (the results
every target gives a correct program) and marks them as still filling until the copying lane
has committed the copy's group and waited for it, so a read or write of them before that is
an :class:`~tenferro_host.kernel.UnwaitedCopyError` at its line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ... import ValidationError
from ...kernel import ir
from ._shared import NONE, SharedState

Lanes = np.ndarray[Any, Any]


class CopyMachine:
    """The copies' half of the interpreter's machine (mixed into it): ``copy_groups`` counts
    each lane's committed groups; ``n``, ``shared``, ``fail`` and the accesses come from it."""

    n: int
    shared: dict[str, SharedState]
    arrays: dict[str, Any]
    copy_groups: Lanes

    if TYPE_CHECKING:  # the machine's own

        def fail(self, *args: Any, **kwargs: Any) -> ValidationError: ...
        def lanes(self, value: Any) -> Lanes: ...
        def expr(self, e: ir.Expr, active: Lanes) -> Any: ...
        def shared_access(
            self, node: ir.Node, kind: str, name: str, index: Any, active: Lanes
        ) -> Lanes: ...
        def address(self, node: ir.Node, name: str, index: Any, active: Lanes) -> Lanes: ...

    def visit_CopyAsync(self, s: ir.CopyAsync, active: Lanes) -> None:
        at = self.lanes(self.expr(s.at, active)).astype(np.int64)
        start = self.lanes(self.expr(s.start, active)).astype(np.int64)
        misaligned = active & ((at % s.count != 0) | (start % s.count != 0))
        if misaligned.any():
            raise self.fail(
                s,
                f"K.copy_async of {s.count} elements starts at element {int(at[misaligned][0])} "
                f"of {s.shared!r} and {int(start[misaligned][0])} of {s.array!r}: both starts "
                f"are multiples of the count",
                misaligned,
            )
        state = self.shared[s.shared]
        lanes = np.flatnonzero(active)
        source = self.arrays[s.array].storage
        for j in range(s.count):
            values = source[self.address(s, s.array, start + j, active)]
            key = self.shared_access(s, "write", s.shared, at + j, active)
            state.data[key] = values
            state.pending[key] = lanes
            state.pending_group[key] = self.copy_groups[lanes]
            state.pending_line[key] = s.line

    def visit_CommitCopies(self, s: ir.CommitCopies, active: Lanes) -> None:
        self.copy_groups[active] += 1

    def visit_WaitCopies(self, s: ir.WaitCopies, active: Lanes) -> None:
        for state in self.shared.values():
            filling = np.flatnonzero(state.pending != NONE)
            if not filling.size:
                continue
            lane = state.pending[filling]
            done = active[lane] & (
                state.pending_group[filling] < self.copy_groups[lane] - s.pending
            )
            state.pending[filling[done]] = NONE

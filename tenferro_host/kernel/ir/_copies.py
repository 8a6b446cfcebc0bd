"""Asynchronous copies: a unit starts copies from an array into a shared array, commits them as
a group, and waits for its older groups, so the next slice's loads are in flight while the
cube works on this one (CUDA's ``cp.async``). A copy's elements are the unit's to wait for:
after ``WaitCopies`` the unit may read them; other units after a ``SyncCube`` too. Reading (or
writing) an element whose copy has not been waited for is an error the interpreter reports
(:class:`~tenferro_host.kernel.UnwaitedCopyError`); targets without the hardware copy at once,
which gives the same results for every program the interpreter accepts."""

from __future__ import annotations

from dataclasses import dataclass

from ._node_base import Expr, Stmt

COPY_BYTES = (4, 8, 16)
"""The sizes one copy may move (``count`` elements of the array's type): what ``cp.async``
moves in one instruction."""


@dataclass(frozen=True)
class CopyAsync(Stmt):
    """``K.copy_async(s, at, x, start, count)``: elements ``start .. start + count - 1`` of
    array ``array`` (relative to the view's offset, contiguous) into elements ``at .. at +
    count - 1`` of shared array ``shared``; ``at`` and ``start`` are u32 multiples of
    ``count``. Where the two addresses are not aligned to the copy's size, a target copies the
    elements one by one, at once."""

    shared: str
    at: Expr
    array: str
    start: Expr
    count: int


@dataclass(frozen=True)
class CommitCopies(Stmt):
    """``K.commit_copies()``: the unit's copies since its last commit become one group."""


@dataclass(frozen=True)
class WaitCopies(Stmt):
    """``K.wait_copies(n)``: the unit waits until at most ``pending`` of its newest committed
    groups are still in flight (copies not yet committed are not waited for)."""

    pending: int


COPY_STATEMENTS: tuple[type[Stmt], ...] = (CopyAsync, CommitCopies, WaitCopies)
"""The statement classes of asynchronous copies."""

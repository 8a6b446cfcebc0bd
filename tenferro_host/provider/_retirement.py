"""Retirement queue: releases leases once the event they wait on has completed.

Leases cover what stream order does not (modules, imported memory, host staging, cross-stream
users). A :class:`Lease` holds the object it keeps alive by reference and says how it is let go,
so an entry names what it keeps (``repr``) and no closure hides it. Polling is non-blocking;
when the queue is full it waits on its *oldest* event only — never a device-wide
synchronization.

>>> held = []
>>> lease = Lease(["staging"], held.extend)
>>> lease
<Lease of list: ['staging']>
>>> lease.release()
>>> held
['staging']
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ._counters import Counters


class Lease:
    """Keeps ``keeps`` alive until released; releasing calls ``let_go(keeps)`` (when given)
    and drops the reference.

    With no ``let_go`` the lease only holds: the object (a source tensor a copy still reads)
    goes when its last other reference does. A lease is released once.
    """

    __slots__ = ("keeps", "let_go")

    def __init__(self, keeps: Any, let_go: Callable[[Any], object] | None = None) -> None:
        self.keeps = keeps
        self.let_go = let_go

    def release(self) -> None:
        """Let the object go: run ``let_go`` on it, then drop both."""
        keeps, let_go = self.keeps, self.let_go
        self.keeps = self.let_go = None
        if let_go is not None:
            let_go(keeps)

    def __repr__(self) -> str:
        what = repr(self.keeps)
        if len(what) > 60:
            what = what[:57] + "..."
        return f"<Lease of {type(self.keeps).__name__}: {what}>"


def _call(release: Callable[[], object]) -> None:
    release()


class RetirementQueue:
    """A bounded FIFO of (event, leases); ``is_done(event)`` polls, ``wait(event)`` blocks.

    Sessions on several threads retire into one runtime's queue: a lock keeps the check of
    the oldest event and its removal one step, so no thread releases a lease whose event has
    not completed (two unlocked polls could pop past a done event onto a pending one).
    """

    def __init__(
        self,
        counters: Counters,
        *,
        is_done: Callable[[Any], bool],
        wait: Callable[[Any], None],
        capacity: int = 256,
    ) -> None:
        self._counters = counters
        self._is_done = is_done
        self._wait = wait
        self.capacity = capacity
        self._entries: deque[tuple[Any, list[Lease]]] = deque()
        self._lock = threading.RLock()  # re-entrant: a released lease may retire again
        #: Set by an open capture: raises instead of a host wait (and polling waits till its end).
        self.refuse_wait: Callable[[str], None] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def retire(self, event: Any, leases: Iterable[Lease | Callable[[], object]]) -> None:
        """Hold ``leases`` until ``event`` completes; release them in order afterwards.

        A plain callable (what SPI 1.0 providers passed before :class:`Lease`) is taken as the
        lease that calls it.
        """
        batch = [lease if isinstance(lease, Lease) else Lease(lease, _call) for lease in leases]
        if not batch:
            return
        with self._lock:
            self.poll()
            if len(self._entries) >= self.capacity:
                if self.refuse_wait is not None:
                    self.refuse_wait("a full retirement queue's wait")
                self._counters.add("queue_full_waits")
                oldest, _ = self._entries[0]
                self._wait(oldest)
                self.poll()
            self._entries.append((event, batch))
            self._counters.add("leases_pending", len(batch))

    def poll(self) -> int:
        """Release every entry whose event completed, oldest first; return how many leases."""
        if not self._entries or self.refuse_wait is not None:
            return 0  # the common case: nothing pending, no lock taken (a capture: none polled)
        released = 0
        with self._lock:
            while self._entries and self._is_done(self._entries[0][0]):
                _, batch = self._entries.popleft()
                released += self._release(batch)
        return released

    def drain(self) -> None:
        """Wait for and release everything (runtime shutdown)."""
        if self.refuse_wait is not None:
            self.refuse_wait("draining the retirement queue")
        with self._lock:
            while self._entries:
                event, batch = self._entries.popleft()
                self._wait(event)
                self._release(batch)

    def _release(self, batch: list[Lease]) -> int:
        for lease in batch:
            lease.release()
        self._counters.add("leases_pending", -len(batch))
        self._counters.add("leases_released", len(batch))
        return len(batch)


__all__ = ["Lease", "RetirementQueue"]

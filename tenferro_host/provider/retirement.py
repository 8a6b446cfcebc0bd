"""Retirement queue: releases leases once the event they wait on has completed.

Leases cover what stream order does not (modules, imported memory, host staging, cross-stream
users). Polling is non-blocking; when the queue is full it waits on its *oldest* event only —
never a device-wide synchronization.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .counters import Counters

Lease = Callable[[], None]


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

    def __len__(self) -> int:
        return len(self._entries)

    def retire(self, event: Any, leases: Iterable[Lease]) -> None:
        """Hold ``leases`` until ``event`` completes; release them in order afterwards."""
        batch = list(leases)
        if not batch:
            return
        with self._lock:
            self.poll()
            if len(self._entries) >= self.capacity:
                self._counters.add("queue_full_waits")
                oldest, _ = self._entries[0]
                self._wait(oldest)
                self.poll()
            self._entries.append((event, batch))
            self._counters.add("leases_pending", len(batch))

    def poll(self) -> int:
        """Release every entry whose event completed, oldest first; return how many leases."""
        if not self._entries:
            return 0  # the common case: nothing pending, no lock taken
        released = 0
        with self._lock:
            while self._entries and self._is_done(self._entries[0][0]):
                _, batch = self._entries.popleft()
                released += self._release(batch)
        return released

    def drain(self) -> None:
        """Wait for and release everything (runtime shutdown)."""
        with self._lock:
            while self._entries:
                event, batch = self._entries.popleft()
                self._wait(event)
                self._release(batch)

    def _release(self, batch: list[Lease]) -> int:
        for lease in batch:
            lease()
        self._counters.add("leases_pending", -len(batch))
        self._counters.add("leases_released", len(batch))
        return len(batch)


__all__ = ["Lease", "RetirementQueue"]

"""Releases that finalizers queue, carried out by their runtime at its next drain point.

The last reference to a storage or a loaded module can go on any thread, at any moment — in
the middle of a driver call on another thread, or while a lock the runtime needs is held. So a
finalizer never calls the driver: it appends a ``(kind, handle)`` release to its runtime's
:class:`DeferredReleases` (one atomic ``deque.append``), and the runtime carries the releases
out at its next drain point (an allocation, a session's entry, ``trim``, ``close``), where it
knows which stream or queue orders them. What a kind means is the runtime's: CUDA frees
memory stream-ordered, unloads modules and runs DLPack deleters behind an event; WebGPU pools
or releases a buffer.

:class:`DeviceStorage` is the storage base whose finalizer does exactly this: it carries its
release from construction (``release``, or None for memory it does not own), so collecting it
costs one append and nothing else.

>>> queue = DeferredReleases()
>>> queue.append(("memory", 0xA000)); queue.append(("module", "lib"))
>>> bool(queue), queue.take_all(), bool(queue)
(True, [('memory', 40960), ('module', 'lib')], False)
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from ._storage import Storage

if TYPE_CHECKING:
    from ._runtime import Runtime

#: A queued release: (kind, handle); the runtime that drains it knows the kinds.
Release = tuple[str, Any]


class DeferredReleases(deque[Release]):
    """A queue any thread appends to and the runtime's drain point empties.

    A ``deque``, so that ``append`` (from finalizers) and the emptiness test (at every drain
    point on the hot path) stay single C calls.
    """

    __slots__ = ()

    def take_all(self) -> list[Release]:
        """Every queued release, oldest first, removed (another thread may drain alongside)."""
        out: list[Release] = []
        while self:
            try:
                out.append(self.popleft())
            except IndexError:  # another thread took the last one
                break
        return out


class DeviceStorage(Storage):
    """Storage whose memory its runtime releases when the storage is collected.

    ``release`` is the ``(kind, handle)`` queued on the runtime's :class:`DeferredReleases`
    when the storage dies, or None when there is nothing to release (a zero-byte storage, a
    block already given back). The finalizer is ``__del__``, not :func:`weakref.finalize`: a
    storage is made on every op's output, and a finalizer object with its registry entry costs
    about four times ``__del__`` per storage made and collected (docs/architecture.md).
    """

    __slots__ = ("release",)

    def __init__(
        self,
        runtime: Runtime,
        nbytes: int,
        release: Release | None,
        kind: str = "owned",
        read_only: bool = False,
    ) -> None:
        super().__init__(runtime, nbytes, kind, read_only)
        self.release = release

    def __del__(self) -> None:
        release = self.release
        if release is not None:
            try:  # noqa: SIM105 - at interpreter shutdown contextlib may already be gone
                self.runtime.deferred.append(release)
            except Exception:  # interpreter shutdown: the runtime's attributes are gone
                pass


__all__ = ["DeferredReleases", "DeviceStorage", "Release"]

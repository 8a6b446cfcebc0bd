"""Freed device blocks kept by size class, so that allocation rarely reaches the driver.

Both GPU runtimes keep one: CUDA's pool blocks (device pointers) and WebGPU's storage buffers
(with the epoch their reuse waits for). Why handing a block out again is ordered after its
earlier uses is the runtime's to say (CUDA: one stream; WebGPU: the epoch). A free list only
keeps entries by class, bounded: blocks above ``max_block`` bypass it and at most ``max_bytes``
are kept (the caller frees what it refuses).

Classes. ``rounded=True`` rounds a size up to a class — powers of two up to 1 MiB (so up to 2x
there), then four classes per octave, steps of an eighth of the octave's top (at most 25 %
rounding) — so that blocks of nearby sizes are shared, as CuPy's and torch's caching allocators
do. ``rounded=False`` makes a size its own class: a WebGPU kernel binds a storage buffer whole,
so a buffer must be exactly its tensor's padded size.

>>> blocks = FreeList(rounded=True, max_bytes=4096)
>>> blocks.size_class(1000), blocks.size_class(3 << 20), blocks.size_class(1 << 30)
(1024, 3145728, 0)
>>> blocks.put(1024, 0xA000), blocks.take(1024), blocks.take(1024)
(True, 40960, None)
>>> FreeList(rounded=False).size_class(1000)
1000
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

T = TypeVar("T")

#: Smallest rounded class: a pool's own granularity makes smaller blocks pointless.
MIN_BLOCK = 512
#: Up to this size rounded classes are powers of two; above it, four per octave.
_POW2_LIMIT = 1 << 20


class FreeList(Generic[T]):
    """Free lists of entries by size class; every operation is O(1) and atomic (a lock: blocks
    are freed and allocated from any thread)."""

    __slots__ = (
        "_free",
        "_lock",
        "blocks",
        "cached_bytes",
        "hits",
        "max_block",
        "max_bytes",
        "misses",
        "rounded",
    )

    def __init__(
        self, *, rounded: bool, max_bytes: int = 256 << 20, max_block: int = 64 << 20
    ) -> None:
        self.rounded = rounded
        self.max_bytes = max_bytes
        self.max_block = max_block
        self._free: dict[int, list[T]] = {}
        self._lock = threading.Lock()
        self.cached_bytes = self.blocks = 0
        self.hits = self.misses = 0

    def size_class(self, nbytes: int) -> int:
        """The class ``nbytes`` is allocated as, or 0 when it bypasses the list (too large)."""
        if nbytes > self.max_block:
            return 0
        if not self.rounded:
            return nbytes
        if nbytes <= _POW2_LIMIT:
            return max(MIN_BLOCK, 1 << (nbytes - 1).bit_length())
        step = (1 << (nbytes - 1).bit_length()) >> 3
        return -(-nbytes // step) * step

    def take(self, size: int) -> T | None:
        """A kept entry of class ``size``, or None (then the caller allocates ``size``)."""
        lock = self._lock
        lock.acquire()  # not ``with``: half the cost on the allocation path, same guarantee
        try:
            free = self._free.get(size)
            if free:
                self.cached_bytes -= size
                self.blocks -= 1
                self.hits += 1
                return free.pop()
            self.misses += 1
            return None
        finally:
            lock.release()

    def put(self, size: int, entry: T) -> bool:
        """Keep a freed entry of class ``size``; False when full (the caller frees it)."""
        lock = self._lock
        lock.acquire()
        try:
            if self.cached_bytes + size > self.max_bytes:
                return False
            self._free.setdefault(size, []).append(entry)
            self.cached_bytes += size
            self.blocks += 1
            return True
        finally:
            lock.release()

    def drain(self) -> list[T]:
        """Every kept entry, removed (to be freed: trim, the out-of-memory retry, close)."""
        with self._lock:
            out = [entry for free in self._free.values() for entry in free]
            self._free.clear()
            self.cached_bytes = self.blocks = 0
            return out

    def stats(self) -> dict[str, int]:
        """Bytes and blocks kept now, and the hits and misses so far (``pool_stats()`` keys)."""
        return {
            "cached_bytes": self.cached_bytes,
            "cached_blocks": self.blocks,
            "cache_hits": self.hits,
            "cache_misses": self.misses,
        }


__all__ = ["FreeList"]

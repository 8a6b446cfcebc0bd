"""Freed device blocks kept by size class, so that allocation rarely reaches the driver.

A CUDA runtime has exactly one stream. A block freed by a collected tensor was last used by
work already enqueued on that stream; whatever the next owner enqueues comes later on the same
stream, so handing the block out again is stream-ordered by construction — the reason CuPy's
and torch's caching allocators are fast. Sizes are rounded up to a class (powers of two up to
1 MiB, so up to 2x there; then four classes per octave, steps of an eighth of the octave's top:
at most 25 % rounding); blocks above ``max_block`` bypass the cache, and at most ``max_bytes``
are kept (the rest goes back to the pool).

>>> cache = BlockCache(max_bytes=4096)
>>> cache.size_class(1000), cache.size_class(3 << 20)
(1024, 3145728)
>>> cache.put(1024, 0xA000), cache.take(1024), cache.take(1024)
(True, 40960, None)
"""

from __future__ import annotations

#: Smallest class: the pool's own granularity makes smaller blocks pointless.
MIN_BLOCK = 512
#: Up to this size classes are powers of two; above it, eight per octave.
_POW2_LIMIT = 1 << 20


class BlockCache:
    """Free lists of device pointers by size class; all operations are O(1)."""

    __slots__ = ("_free", "blocks", "cached_bytes", "hits", "max_block", "max_bytes", "misses")

    def __init__(self, *, max_bytes: int = 256 << 20, max_block: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self.max_block = max_block
        self._free: dict[int, list[int]] = {}
        self.cached_bytes = 0
        self.blocks = 0
        self.hits = self.misses = 0

    def size_class(self, nbytes: int) -> int:
        """The class ``nbytes`` is allocated as, or 0 when it bypasses the cache (too large)."""
        if nbytes > self.max_block:
            return 0
        if nbytes <= _POW2_LIMIT:
            return max(MIN_BLOCK, 1 << (nbytes - 1).bit_length())
        step = (1 << (nbytes - 1).bit_length()) >> 3
        return -(-nbytes // step) * step

    def take(self, size: int) -> int | None:
        """A cached block of class ``size``, or None (then the caller allocates ``size``)."""
        free = self._free.get(size)
        if free:
            try:
                ptr = free.pop()
            except IndexError:  # another thread took the last one
                ptr = None
            else:
                self.cached_bytes -= size
                self.blocks -= 1
                self.hits += 1
                return ptr
        self.misses += 1
        return None

    def put(self, size: int, ptr: int) -> bool:
        """Keep a freed block of class ``size``; False when full (the caller frees it)."""
        if self.cached_bytes + size > self.max_bytes:
            return False
        self._free.setdefault(size, []).append(ptr)
        self.cached_bytes += size
        self.blocks += 1
        return True

    def drain(self) -> list[int]:
        """Every cached block, removed from the cache (to be freed: trim, OOM retry, close)."""
        out = [ptr for free in self._free.values() for ptr in free]
        self._free.clear()
        self.cached_bytes = self.blocks = 0
        return out

    def stats(self) -> dict[str, int]:
        """Bytes and blocks cached now, and the hits and misses so far."""
        return {
            "cached_bytes": self.cached_bytes,
            "cached_blocks": self.blocks,
            "cache_hits": self.hits,
            "cache_misses": self.misses,
        }


__all__ = ["MIN_BLOCK", "BlockCache"]

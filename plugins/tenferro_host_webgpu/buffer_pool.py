"""Freed storage buffers kept by size, so that allocation rarely calls ``create_buffer``.

A WebGPU runtime's tensors are storage buffers of one device. When a tensor's storage is
collected its buffer comes here (through the runtime's free list) and the next allocation of its
size takes it: no ``create_buffer``, and the bind groups cached for that buffer object
(:class:`.pipelines.BindGroups`) stay valid, because a group names the buffer, whichever tensor
owns it now. A buffer leaves the pool only to be released: when the pool is full, on
``runtime.trim()``, or when an allocation finds the device full.

Ordering. Unlike CUDA, where a block's reuse is stream-ordered by construction, WebGPU has
two ways into a buffer: commands recorded in the runtime's pending encoder, and
``queue.write_buffer`` (uploads), which runs at the start of the *next* ``submit`` — before the
command buffers of that submit. Commands recorded into the pending encoder after a buffer's reuse
are ordered after its earlier uses in the same encoder, but an upload into a reused buffer while
the encoder still holds earlier commands on it would run before them. So every pooled buffer
carries an *epoch*: the number of submissions after which all its earlier uses were submitted.
A write into a storage whose epoch the queue has not reached submits the pending work first
(:meth:`.WebGpuRuntime._write`); so does releasing pooled buffers (``destroy`` of a buffer that
unsubmitted commands use would make their submit invalid).

Why this is not the CUDA plugin's ``BlockCache``: that class lives in another plugin, which
this one must not import (plugins build on the provider SPI only, and WebGPU runs without the
CUDA plugin's modules), and moving its size-class arithmetic into the provider SPI means editing
the CUDA plugin. Nor would the arithmetic fit: a WebGPU tensor's buffer is exactly its device
bytes padded to 4 (docs/webgpu.md; kernels bind storages whole, and ``buffer.size`` is what
robust buffer access clamps to), so a rounded-up class would change what a kernel binds. Here a
buffer's class is its exact size; buffers above ``max_block`` bypass the pool, and at most
``max_bytes`` are kept. Entries also carry an epoch, which CUDA's blocks do not need.

>>> pool = BufferPool(max_bytes=4096)
>>> pool.size_class(1000), pool.size_class(1 << 30)
(1000, 0)
>>> pool.put(1000, "buffer", 3), pool.take(1000), pool.take(1000)
(True, ('buffer', 3), None)
"""

from __future__ import annotations

import threading
from typing import Any


class BufferPool:
    """Free lists of ``(buffer, epoch)`` by buffer size, bounded by ``max_bytes``; a lock makes
    each operation atomic (allocations may come from several threads)."""

    __slots__ = (
        "_free",
        "_lock",
        "blocks",
        "cached_bytes",
        "hits",
        "max_block",
        "max_bytes",
        "misses",
    )

    def __init__(self, *, max_bytes: int = 256 << 20, max_block: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self.max_block = max_block
        self._free: dict[int, list[tuple[Any, int]]] = {}
        self._lock = threading.Lock()
        self.cached_bytes = self.blocks = 0
        self.hits = self.misses = 0

    def size_class(self, nbytes: int) -> int:
        """The class of a buffer of ``nbytes`` (its size), or 0 when it bypasses the pool."""
        return nbytes if nbytes <= self.max_block else 0

    def take(self, size: int) -> tuple[Any, int] | None:
        """A pooled ``(buffer, epoch)`` of class ``size``, or None (the caller creates one)."""
        with self._lock:
            free = self._free.get(size)
            if free:
                self.cached_bytes -= size
                self.blocks -= 1
                self.hits += 1
                return free.pop()
            self.misses += 1
            return None

    def put(self, size: int, buffer: Any, epoch: int) -> bool:
        """Keep a freed buffer of class ``size``; False when full (the caller releases it)."""
        with self._lock:
            if self.cached_bytes + size > self.max_bytes:
                return False
            self._free.setdefault(size, []).append((buffer, epoch))
            self.cached_bytes += size
            self.blocks += 1
            return True

    def drain(self) -> list[tuple[Any, int]]:
        """Every pooled entry, removed (to be released: trim, the OOM retry)."""
        with self._lock:
            out = [entry for free in self._free.values() for entry in free]
            self._free.clear()
            self.cached_bytes = self.blocks = 0
            return out

    def stats(self) -> dict[str, int]:
        """The keys of the CUDA runtime's block cache in its ``pool_stats()``."""
        return {
            "cached_bytes": self.cached_bytes,
            "cached_blocks": self.blocks,
            "cache_hits": self.hits,
            "cache_misses": self.misses,
        }


__all__ = ["BufferPool"]

"""Bounded per-runtime resource cache (entries and bytes) with LRU eviction.

Operation authors cache compiled modules and similar objects through ``session.resource``;
the bound keeps the cache from growing without limit, and an evicted value is handed to
``on_evict`` so its owner can retire it on its last-use event instead of freeing it early.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from ..errors import ValidationError


class ResourceCache:
    """LRU cache bounded by ``max_entries`` and ``max_bytes``; safe to share between threads.

    Sessions of one runtime may run on several threads at once, all using its cache: one lock
    keeps the byte count and the recency order exact. ``init()`` runs under it, so two
    threads missing the same key make the value once.
    """

    def __init__(
        self,
        *,
        max_entries: int = 256,
        max_bytes: int = 256 << 20,
        on_evict: Callable[[Hashable, Any], None] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._on_evict = on_evict
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = self.evictions = 0
        self._lock = threading.RLock()  # re-entrant: an init() may use the cache itself

    def get(self, key: Hashable, init: Callable[[], Any], nbytes: int | None = None) -> Any:
        """The cached value for ``key``, creating it with ``init()`` on a miss."""
        with self._lock:
            return self._get(key, init, nbytes)

    def _get(self, key: Hashable, init: Callable[[], Any], nbytes: int | None) -> Any:
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return found[0]
        self.misses += 1
        value = init()
        size = nbytes if nbytes is not None else int(getattr(value, "nbytes", 0) or 0)
        if size > self.max_bytes:
            raise ValidationError(
                f"a resource of {size} bytes exceeds the cache bound of {self.max_bytes} bytes; "
                "keep it yourself or cache something smaller",
                argument="nbytes",
            )
        self._entries[key] = (value, size)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            old_key, (old_value, old_size) = self._entries.popitem(last=False)
            self._bytes -= old_size
            self.evictions += 1
            if self._on_evict is not None:
                self._on_evict(old_key, old_value)
        return value

    def clear(self) -> None:
        """Drop every entry (each one through the eviction callback) and reset the byte count."""
        with self._lock:
            while self._entries:
                key, (value, _) = self._entries.popitem(last=False)
                if self._on_evict is not None:
                    self._on_evict(key, value)
            self._bytes = 0

    def values(self) -> list[Any]:
        """The cached values, oldest first: what a caller keeps alive past an eviction (a
        captured CUDA graph keeps the modules its launches use)."""
        with self._lock:
            return [value for value, _ in self._entries.values()]

    def stats(self) -> dict[str, int]:
        """Entries, bytes, bounds, hits, misses and evictions."""
        with self._lock:
            return self._stats()

    def _stats(self) -> dict[str, int]:
        return {
            "entries": len(self._entries),
            "bytes": self._bytes,
            "max_entries": self.max_entries,
            "max_bytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
        }


__all__ = ["ResourceCache"]

"""The bounded in-process memos of the host and its plugins, with statistics, and the
per-runtime cache of device resources (a memo bounded in bytes as well as entries).

A hot path looks a key up with :meth:`Memo.get` (a dict ``get`` and a counter) and stores what it
computed with :meth:`Memo.put`, which evicts when the memo is full: everything at once by default
(values that are cheap to remake, such as layouts and launch configs), or the least recently used
entry (``lru=True``, under a lock, for values that are dear to remake). Each memo belongs to a
:class:`MemoKind` declared once at import time under a unique name, so :func:`memo_kinds` lists
every memo a process can have (the caches table of docs/architecture.md is checked against it)
and :func:`memo_stats` sums the live memos of each kind. A runtime's :class:`ResourceCache`
keeps what operation authors cache through ``session.resource`` (compiled modules), bounded in
entries and bytes; what it evicts goes to its owner (``on_evict``), which retires it on its
last-use event instead of freeing it early.

>>> kind = MemoKind("doc.squares", 2)
>>> squares = kind.new()
>>> for n in (1, 2, 1, 3):
...     if squares.get(n) is None:
...         _ = squares.put(n, n * n)
>>> s = squares.stats()
>>> (s.hits, s.misses, s.evictions, s.size, s.bound)
(1, 3, 2, 1, 2)
>>> forget_kind("doc.squares")
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import ValidationError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class MemoStats:
    """Counters of one memo (or of every live memo of a kind): ``size`` entries of ``bound``."""

    name: str
    hits: int
    misses: int
    evictions: int
    size: int
    bound: int


class Memo(Generic[K, V]):
    """A bounded mapping of computed values, emptied whole when full; None is never stored (it
    means "absent"). Its dict operations are atomic, so threads may share it without a lock."""

    __slots__ = ("__weakref__", "_data", "bound", "evictions", "hits", "kind", "misses")

    def __init__(self, kind: MemoKind, bound: int | None = None) -> None:
        self.kind = kind
        self.bound = kind.bound if bound is None else _check_bound(bound)
        self._data: dict[K, V] = self._new_data()
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        kind._live.add(self)

    def _new_data(self) -> dict[K, V]:
        return {}

    def get(self, key: K) -> V | None:
        """The value under ``key``, or None; counted as a hit or a miss. A hit is one dict
        subscript (no call), so a memo costs a hot path one Python call per lookup."""
        try:
            found = self._data[key]
        except KeyError:
            self.misses += 1
            return None
        self.hits += 1
        return found

    def peek(self, key: K) -> V | None:
        """The value under ``key``, or None, neither counted nor made recent (a question
        about the memo, not a lookup of the hot path)."""
        return self._data.get(key)

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (emptying the memo first when full) and return it."""
        data = self._data
        if len(data) >= self.bound and key not in data:
            self.evictions += len(data)
            data.clear()
        data[key] = value
        return value

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value under ``key``, made by ``make()`` and stored on a miss."""
        found = self.get(key)
        return found if found is not None else self.put(key, make())

    def pop(self, key: K) -> V | None:
        """Remove and return the value under ``key`` (None if absent); not an eviction."""
        return self._data.pop(key, None)

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        self._data.clear()

    def reset(self) -> None:
        """Drop every entry and zero the counters."""
        self._data.clear()
        self.hits = self.misses = self.evictions = 0

    def values(self) -> list[V]:
        """A snapshot of the stored values."""
        return list(self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def stats(self) -> MemoStats:
        """This memo's counters."""
        return MemoStats(
            self.kind.name, self.hits, self.misses, self.evictions, len(self), self.bound
        )


class LruMemo(Memo[K, V]):
    """A memo that evicts its least recently used entry, under a lock (values dear to remake)."""

    __slots__ = ("_lock",)

    def __init__(self, kind: MemoKind, bound: int | None = None) -> None:
        super().__init__(kind, bound)
        self._lock = threading.Lock()

    def _new_data(self) -> dict[K, V]:
        return OrderedDict()

    def get(self, key: K) -> V | None:
        """The value under ``key`` (made the most recent), or None; counted."""
        data: OrderedDict[K, V] = self._data  # type: ignore[assignment]
        with self._lock:
            found = data.get(key)
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
            data.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` as the most recent, evicting the oldest when full."""
        data: OrderedDict[K, V] = self._data  # type: ignore[assignment]
        with self._lock:
            data[key] = value
            data.move_to_end(key)
            while len(data) > self.bound:
                data.popitem(last=False)
                self.evictions += 1
        return value

    def pop(self, key: K) -> V | None:
        """Remove and return the value under ``key`` (None if absent); not an eviction."""
        with self._lock:
            return self._data.pop(key, None)


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
            found = self._entries.get(key)
            if found is not None:
                self.hits += 1
                self._entries.move_to_end(key)
                return found[0]
            return self._make(key, init, nbytes)

    def _make(self, key: Hashable, init: Callable[[], Any], nbytes: int | None) -> Any:
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


def _check_bound(bound: int) -> int:
    if type(bound) is not int or bound <= 0:
        raise ValidationError(f"a memo bound is a positive int, got {bound!r}", argument="bound")
    return bound


_KINDS: dict[str, MemoKind] = {}
_KINDS_LOCK = threading.Lock()


class MemoKind:
    """A declared kind of memo: a unique ``name`` (``"cuda.launch_configs"``), its ``bound`` in
    entries, its eviction (``lru`` or all at once) and what it keeps (``what``, for the docs)."""

    def __init__(self, name: str, bound: int, *, lru: bool = False, what: str = "") -> None:
        self.name = name
        self.bound = _check_bound(bound)
        self.lru = lru
        self.what = what
        self._live: weakref.WeakSet[Memo[Any, Any]] = weakref.WeakSet()
        with _KINDS_LOCK:
            if name in _KINDS:
                raise ValidationError(f"a memo kind named {name!r} is already declared")
            _KINDS[name] = self

    def new(self, bound: int | None = None) -> Memo[K, V]:
        """A fresh, empty memo of this kind (``bound`` overrides the kind's)."""
        return LruMemo(self, bound) if self.lru else Memo(self, bound)

    def stats(self) -> MemoStats:
        """The counters of every live memo of this kind, summed."""
        live = [m.stats() for m in list(self._live)]
        return MemoStats(
            self.name,
            sum(s.hits for s in live),
            sum(s.misses for s in live),
            sum(s.evictions for s in live),
            sum(s.size for s in live),
            max((m.bound for m in list(self._live)), default=self.bound),
        )


def memo(name: str, bound: int, *, lru: bool = False, what: str = "") -> Memo[K, V]:
    """Declare a kind that has one, module-level memo, and make that memo."""
    return MemoKind(name, bound, lru=lru, what=what).new()


def memo_kinds() -> dict[str, MemoKind]:
    """Every declared memo kind, by name (those of modules imported so far)."""
    with _KINDS_LOCK:
        return dict(_KINDS)


def memo_stats() -> list[MemoStats]:
    """The summed counters of each declared kind, by name."""
    return [kind.stats() for _, kind in sorted(memo_kinds().items())]


def forget_kind(name: str) -> None:
    """Undeclare kind ``name`` (tests and doctests that declare their own)."""
    with _KINDS_LOCK:
        _KINDS.pop(name, None)


__all__ = [
    "LruMemo",
    "Memo",
    "MemoKind",
    "MemoStats",
    "ResourceCache",
    "forget_kind",
    "memo",
    "memo_kinds",
    "memo_stats",
]

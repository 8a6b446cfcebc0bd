"""The bounded resource cache: entries and bytes bounds, LRU order, evictions, stats."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.provider import ResourceCache


def make(**bounds):
    evicted: list[tuple[object, object]] = []
    cache = ResourceCache(on_evict=lambda k, v: evicted.append((k, v)), **bounds)
    return cache, evicted


def test_hit_returns_the_cached_value_without_init():
    cache, _ = make()
    assert cache.get("k", lambda: "v1", nbytes=1) == "v1"
    assert cache.get("k", lambda: pytest.fail("init called on a hit")) == "v1"
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1


def test_entry_bound_evicts_the_least_recently_used():
    cache, evicted = make(max_entries=2)
    cache.get("a", lambda: 1, nbytes=0)
    cache.get("b", lambda: 2, nbytes=0)
    cache.get("a", lambda: 0)  # a is now the most recent
    cache.get("c", lambda: 3, nbytes=0)
    assert evicted == [("b", 2)]
    assert cache.stats()["entries"] == 2 and cache.stats()["evictions"] == 1


def test_byte_bound_evicts_until_it_fits():
    cache, evicted = make(max_bytes=100)
    cache.get("a", lambda: "A", nbytes=40)
    cache.get("b", lambda: "B", nbytes=40)
    cache.get("c", lambda: "C", nbytes=90)
    assert evicted == [("a", "A"), ("b", "B")]
    assert cache.stats()["bytes"] == 90


def test_size_defaults_to_the_values_nbytes():
    cache, _ = make()
    cache.get("arr", lambda: np.zeros(10, np.float64))
    assert cache.stats()["bytes"] == 80


def test_a_value_larger_than_the_bound_is_refused():
    cache, evicted = make(max_bytes=10)
    with pytest.raises(tf.ValidationError, match="exceeds the cache bound") as info:
        cache.get("big", lambda: "x", nbytes=11)
    assert info.value.argument == "nbytes"
    assert cache.stats()["entries"] == 0 and evicted == []


def test_clear_hands_every_entry_to_on_evict():
    cache, evicted = make()
    cache.get("a", lambda: 1, nbytes=5)
    cache.get("b", lambda: 2, nbytes=5)
    cache.clear()
    assert evicted == [("a", 1), ("b", 2)]
    assert cache.stats() == {
        "entries": 0,
        "bytes": 0,
        "max_entries": 256,
        "max_bytes": 256 << 20,
        "hits": 0,
        "misses": 2,
        "evictions": 0,
    }


def test_threads_sharing_the_cache_keep_its_accounting_exact():
    import sys
    import threading

    cache, evicted = make(max_entries=4)
    calls = 20_000
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show at once
    try:
        workers = [
            threading.Thread(
                target=lambda k=k: [cache.get((7 * k + i) % 9, object, 1) for i in range(calls)]
            )
            for k in range(4)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(switch)
    stats = cache.stats()
    assert stats["entries"] == stats["bytes"] == 4
    assert stats["hits"] + stats["misses"] == 4 * calls
    assert stats["evictions"] == len(evicted) == stats["misses"] - 4


def test_values_lists_what_is_cached_oldest_first():
    cache, _ = make(max_entries=2)
    for key in "abc":
        cache.get(key, lambda key=key: key.upper(), nbytes=1)
    assert cache.values() == ["B", "C"]

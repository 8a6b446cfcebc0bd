"""Freed pool blocks reused by size class (the CUDA runtime's free list), without a GPU: a
recording stand-in for the driver counts every call, so "allocation does not reach the driver
on the hot path" is proved by counts; trim, the OOM retry, the cache bound and pool statistics
stay true."""

from __future__ import annotations

import gc

import pytest
from support.driver_stand_in import recording_driver, stand_in_runtime
from tenferro_host_cuda import _driver as driver

import tenferro_host as tf


@pytest.fixture
def fake():
    with recording_driver() as recording:
        yield recording


@pytest.fixture
def rt(fake):
    made = stand_in_runtime(tf.Host())
    made.blocks.max_bytes, made.blocks.max_block = 1 << 20, 1 << 16
    return made


def memory(fake):
    """The allocator's driver calls (the context guard's checks left out)."""
    return [c for c in fake.calls if c[0] in ("alloc", "free", "trim")]


def allocs(fake):
    return [c for c in memory(fake) if c[0] == "alloc"]


def test_a_freed_block_is_reused_without_a_driver_call(rt, fake):
    first = rt.allocate_bytes(4000)
    ptr = first.ptr
    assert allocs(fake) == [("alloc", 4096)] and first.nbytes == 4000
    del first
    gc.collect()
    for _ in range(100):  # the hot path: allocate, drop, allocate again
        again = rt.allocate_bytes(4096)
        assert again.ptr == ptr
        del again
    assert memory(fake) == [("alloc", 4096)]
    assert rt.blocks.hits == 100


def test_trim_frees_the_cached_blocks_then_trims_the_pool(rt, fake):
    a, b = rt.allocate_bytes(512), rt.allocate_bytes(100_000 // 2)
    del a, b
    gc.collect()
    rt.drain_deferred()
    assert rt.pool_stats()["cached_blocks"] == 2
    rt.trim()
    assert [c[0] for c in memory(fake)[-3:]] == ["free", "free", "trim"]
    assert not fake.live
    stats = rt.pool_stats()
    assert stats["cached_bytes"] == 0 and stats["used_current"] == 0


def test_pool_stats_say_how_much_of_used_is_cached(rt, fake):
    keep = rt.allocate_bytes(1024)
    dropped = rt.allocate_bytes(2048)
    del dropped
    gc.collect()
    rt.drain_deferred()
    stats = rt.pool_stats()
    assert stats["used_current"] == 1024 + 2048 and stats["cached_bytes"] == 2048
    assert keep.ptr


def test_out_of_memory_frees_the_cache_and_retries_once(rt, fake):
    dropped = rt.allocate_bytes(8192)
    del dropped
    gc.collect()
    rt.drain_deferred()
    fake.oom = 1
    got = rt.allocate_bytes(16384)  # a different class: the cache cannot serve it
    assert got.ptr and [c[0] for c in memory(fake)[-3:]] == ["alloc", "free", "alloc"]
    assert rt.blocks.cached_bytes == 0
    fake.oom = 2
    with pytest.raises(driver.OutOfMemoryError, match="out of device memory allocating 100"):
        rt.allocate_bytes(100)


def test_large_blocks_and_a_full_cache_go_back_to_the_pool(rt, fake):
    big = rt.allocate_bytes((1 << 16) + 1)  # above max_block: exact size, never cached
    assert allocs(fake)[-1] == ("alloc", (1 << 16) + 1) and big.block == 0
    ptr = big.ptr
    del big
    gc.collect()
    rt.drain_deferred()
    assert memory(fake)[-1] == ("free", (ptr, rt._stream))
    held = [rt.allocate_bytes(1 << 16) for _ in range(17)]  # 17 x 64 KiB > the 1 MiB bound
    del held
    gc.collect()
    rt.drain_deferred()
    assert rt.blocks.cached_bytes == 1 << 20 and rt.blocks.blocks == 16
    assert sum(1 for c in memory(fake) if c[0] == "free") == 2  # the big one and the 17th

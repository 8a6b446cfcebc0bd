"""The CUDA runtime's size-class block cache, without a GPU: a recording stand-in for the driver
counts every call, so "allocation does not reach the driver on the hot path" is proved by
counts; trim, the OOM retry, the cache bound and pool statistics stay true."""

from __future__ import annotations

import gc
import types
from collections import deque

import pytest
from tenferro_host_cuda import driver
from tenferro_host_cuda.block_cache import BlockCache
from tenferro_host_cuda.runtime import CudaRuntime

from tenferro_host.identity import AllocationDomainId
from tenferro_host.provider.counters import Counters
from tenferro_host.provider.retirement import RetirementQueue

CTX = 7


class RecordingDriver:
    """The driver calls the allocator makes, recorded; ``oom`` makes the next allocation fail."""

    CUmemPool_attribute = types.SimpleNamespace(
        CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT=1,
        CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH=2,
        CU_MEMPOOL_ATTR_USED_MEM_CURRENT=3,
        CU_MEMPOOL_ATTR_USED_MEM_HIGH=4,
    )

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.live: dict[int, int] = {}
        self.next = 0x10000
        self.oom = 0

    def cuCtxGetCurrent(self):  # noqa: N802 - the driver's names
        return (0, CTX)

    def cuMemAllocFromPoolAsync(self, nbytes, pool, stream):  # noqa: N802
        self.calls.append(("alloc", nbytes))
        if self.oom:
            self.oom -= 1
            return (driver.OUT_OF_MEMORY, None)
        ptr, self.next = self.next, self.next + nbytes
        self.live[ptr] = nbytes
        return (0, ptr)

    def cuMemFreeAsync(self, ptr, stream):  # noqa: N802
        self.calls.append(("free", ptr))
        del self.live[ptr]
        return (0,)

    def cuMemPoolTrimTo(self, pool, keep):  # noqa: N802
        self.calls.append(("trim", keep))
        return (0,)

    def cuMemPoolGetAttribute(self, pool, attr):  # noqa: N802
        used = sum(self.live.values())
        return (0, used if attr in (3, 4) else used)

    def cuGetErrorName(self, err):  # noqa: N802
        return (0, b"CUDA_ERROR_OUT_OF_MEMORY")

    def cuGetErrorString(self, err):  # noqa: N802
        return (0, b"out of memory")

    def CUresult(self, code):  # noqa: N802
        return code


@pytest.fixture
def fake():
    recording = RecordingDriver()
    saved, driver._driver = driver._driver, recording
    try:
        yield recording
    finally:
        driver._driver = saved


@pytest.fixture
def rt(fake):
    """A CudaRuntime's allocator state over the recording driver (no device behind it)."""
    rt = object.__new__(CudaRuntime)
    rt.uuid_bytes = b"\x01" * 16
    rt.domain = AllocationDomainId.new()
    rt.counters = Counters()
    rt.retirement = RetirementQueue(rt.counters, is_done=lambda e: True, wait=lambda e: None)
    rt.primary = driver.PrimaryContext(CTX)
    rt.blocks = BlockCache(max_bytes=1 << 20, max_block=1 << 16)
    rt._deferred = deque()
    rt._closed = False
    rt._pool = rt._stream = object()
    rt.deferred_errors = 0
    rt.module_counts = {"loaded": 0, "unloaded": 0}
    rt.kind, rt.index = "cuda", 0
    return rt


def allocs(fake):
    return [c for c in fake.calls if c[0] == "alloc"]


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
    assert fake.calls == [("alloc", 4096)]
    assert rt.blocks.hits == 100


def test_trim_frees_the_cached_blocks_then_trims_the_pool(rt, fake):
    a, b = rt.allocate_bytes(512), rt.allocate_bytes(100_000 // 2)
    del a, b
    gc.collect()
    rt.drain_deferred()
    assert rt.pool_stats()["cached_blocks"] == 2
    rt.trim()
    assert [c[0] for c in fake.calls[-3:]] == ["free", "free", "trim"]
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
    assert got.ptr and [c[0] for c in fake.calls[-3:]] == ["alloc", "free", "alloc"]
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
    assert fake.calls[-1] == ("free", ptr)
    held = [rt.allocate_bytes(1 << 16) for _ in range(17)]  # 17 x 64 KiB > the 1 MiB bound
    del held
    gc.collect()
    rt.drain_deferred()
    assert rt.blocks.cached_bytes == 1 << 20 and rt.blocks.blocks == 16
    assert sum(1 for c in fake.calls if c[0] == "free") == 2  # the big one and the 17th


def test_size_classes_round_up_at_most_a_quarter_above_a_mebibyte():
    cache = BlockCache()
    for n in (1, 511, 512, 513, 4096, 1 << 20, (1 << 20) + 1, 3_000_000, 40_000_000):
        size = cache.size_class(n)
        assert size >= n and size >= 512
        if n > 1 << 20:
            assert size <= n * 1.25
    assert cache.size_class(cache.max_block + 1) == 0

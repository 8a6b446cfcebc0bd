"""The free list both GPU runtimes keep freed blocks in: classes, bound, atomicity."""

from __future__ import annotations

import threading

from tenferro_host.provider import FreeList


def test_rounded_classes_round_up_at_most_a_quarter_above_a_mebibyte() -> None:
    blocks: FreeList[int] = FreeList(rounded=True)
    for n in (1, 511, 512, 513, 4096, 1 << 20, (1 << 20) + 1, 3_000_000, 40_000_000):
        size = blocks.size_class(n)
        assert size >= n and size >= 512
        if n > 1 << 20:
            assert size <= n * 1.25
        else:
            assert size & (size - 1) == 0  # a power of two
    assert blocks.size_class(blocks.max_block + 1) == 0


def test_exact_classes_are_the_size_itself() -> None:
    buffers: FreeList[str] = FreeList(rounded=False)
    assert [buffers.size_class(n) for n in (4, 1000, 4096)] == [4, 1000, 4096]
    assert buffers.size_class(buffers.max_block + 1) == 0


def test_put_take_counts_and_refuses_beyond_max_bytes() -> None:
    blocks: FreeList[int] = FreeList(rounded=True, max_bytes=2048)
    assert blocks.take(1024) is None
    assert blocks.put(1024, 1) and blocks.put(1024, 2)
    assert not blocks.put(512, 3)  # 2048 + 512 > max_bytes: the caller frees it
    assert blocks.stats() == {
        "cached_bytes": 2048,
        "cached_blocks": 2,
        "cache_hits": 0,
        "cache_misses": 1,
    }
    assert blocks.take(1024) == 2 and blocks.take(512) is None
    assert blocks.drain() == [1] and blocks.stats()["cached_bytes"] == 0
    assert blocks.stats()["cache_hits"] == 1 and blocks.stats()["cache_misses"] == 2


def test_concurrent_puts_and_takes_keep_the_counts_exact() -> None:
    blocks: FreeList[int] = FreeList(rounded=False, max_bytes=1 << 40)
    taken: list[int] = []

    def churn(base: int) -> None:
        for i in range(2000):
            blocks.put(64, base + i)
            found = blocks.take(64)
            if found is not None:
                taken.append(found)

    threads = [threading.Thread(target=churn, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    left = blocks.drain()
    assert len(taken) + len(left) == 8000 and len(set(taken + left)) == 8000
    assert blocks.stats()["cached_bytes"] == 0 and blocks.stats()["cached_blocks"] == 0

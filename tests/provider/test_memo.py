"""The one memo helper: bounds, eviction, statistics, and the registry of memo kinds that the
caches table of docs/architecture.md is checked against."""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenferro_host as tf
from tenferro_host._memo import forget_kind
from tenferro_host.provider import Memo, MemoKind, memo_kinds, memo_stats

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kind() -> Iterator[MemoKind]:
    made: list[str] = []

    def declare(name: str, bound: int, **kw: object) -> MemoKind:
        made.append(name)
        return MemoKind(name, bound, **kw)  # type: ignore[arg-type]

    yield declare  # type: ignore[misc]
    for name in made:
        forget_kind(name)


def test_a_full_memo_is_emptied_whole_and_counts_it(kind):
    m: Memo[int, str] = kind("test.clear", 2).new()
    assert m.get(1) is None and m.put(1, "a") == "a" and m.put(2, "b") == "b"
    assert m.get(1) == "a"
    m.put(2, "B")  # a key already there replaces, evicts nothing
    m.put(3, "c")
    s = m.stats()
    assert (s.name, s.hits, s.misses, s.evictions, s.size, s.bound) == ("test.clear", 1, 1, 2, 1, 2)
    assert 3 in m and 1 not in m and len(m) == 1


def test_an_lru_memo_evicts_the_least_recently_used(kind):
    m: Memo[int, str] = kind("test.lru", 2, lru=True).new()
    m.put(1, "a")
    m.put(2, "b")
    assert m.get(1) == "a"  # 2 is now the oldest
    m.put(3, "c")
    assert 2 not in m and 1 in m and 3 in m
    assert m.stats().evictions == 1


def test_peek_neither_counts_nor_makes_recent(kind):
    m: Memo[int, str] = kind("test.peek", 2, lru=True).new()
    m.put(1, "a")
    m.put(2, "b")
    assert m.peek(1) == "a" and m.peek(9) is None
    assert (m.stats().hits, m.stats().misses) == (0, 0)
    m.put(3, "c")  # 1 stayed the oldest: peek did not make it recent
    assert 1 not in m and 2 in m and 3 in m


def test_get_or_make_makes_once_and_bounds_override(kind):
    calls = []
    m: Memo[str, int] = kind("test.make", 8).new(bound=1)
    for _ in range(3):
        m.get_or_make("k", lambda: calls.append(1) or 7)
    assert calls == [1] and m.stats().hits == 2 and m.bound == 1


def test_reset_zeroes_the_counters_clear_keeps_them(kind):
    m: Memo[int, int] = kind("test.reset", 4).new()
    m.put(1, 1)
    m.get(1)
    m.clear()
    assert len(m) == 0 and m.hits == 1
    m.reset()
    assert (m.hits, m.misses, m.evictions) == (0, 0, 0)


def test_kind_stats_sum_the_live_memos_of_a_kind(kind):
    k = kind("test.sum", 4)
    a, b = k.new(), k.new()
    a.put(1, 1)
    b.put(1, 1)
    a.get(1)
    b.get(2)
    s = k.stats()
    assert (s.hits, s.misses, s.size) == (1, 1, 2)
    assert "test.sum" in {s.name for s in memo_stats()}


def test_bad_bounds_and_duplicate_names_are_refused(kind):
    with pytest.raises(tf.ValidationError, match="a memo bound is a positive int"):
        kind("test.zero", 0)
    with pytest.raises(tf.ValidationError, match="a memo bound is a positive int"):
        kind("test.bool", 4).new(bound=True)
    with pytest.raises(tf.ValidationError, match="already declared"):
        kind("test.bool", 4)


def test_an_lru_memo_shared_by_threads_stays_bounded(kind):
    m: Memo[int, int] = kind("test.threads", 16, lru=True).new()

    def work(base: int) -> None:
        for i in range(2000):
            if m.get((base + i) % 40) is None:
                m.put((base + i) % 40, i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = m.stats()
    assert s.size <= 16 and s.hits + s.misses == 8000


def import_everything() -> None:
    """Import every module of the host and the built-in plugins (no GPU needed to import)."""
    import tenferro_host_cuda
    import tenferro_host_cuda_jit
    import tenferro_host_linalg
    import tenferro_host_webgpu

    for package in (
        tf,
        tenferro_host_cuda,
        tenferro_host_cuda_jit,
        tenferro_host_webgpu,
        tenferro_host_linalg,
    ):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".scaffold.template" in info.name or info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def table_names() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Caches", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z_.]+)`", row.split("|")[1])}


def test_the_caches_table_names_every_memo_kind():
    import_everything()
    declared = {n for n in memo_kinds() if not n.startswith(("test.", "doc."))}
    assert len(declared) >= 10  # the walk really imported the plugins' memos
    named = table_names()
    assert declared - named == set(), "memo kinds missing from docs/architecture.md's caches table"
    assert named - declared == set(), "the caches table names memos that no module declares"

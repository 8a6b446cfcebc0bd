"""The cache directory on its own: hits, misses, the LRU bound, corrupt and truncated entries."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from support import cache_support
from support.subprocesses import Subprocess

from tenferro_host import provider
from tenferro_host.errors import ValidationError
from tenferro_host.provider import CachedKernel, KernelCache, KernelCacheWarning, KernelKey
from tenferro_host.provider import _kernel_cache as kc

cache_dir = cache_support.cache_dir
cache_log = cache_support.cache_log


def key(source: str = "a", name: str = "k.cu", **parts: str) -> KernelKey:
    return KernelKey("test", name, {"source": source, "options": "", **parts})


class Builder:
    """A build function that counts its calls."""

    def __init__(self, payload: bytes = b"\x7fELF image") -> None:
        self.payload = payload
        self.calls = 0

    def __call__(self) -> CachedKernel:
        self.calls += 1
        return CachedKernel(self.payload, {"log": "ok", "calls": self.calls})


def entry_path(cache: KernelCache, k: KernelKey) -> Path:
    return cache.root / "entries" / k.digest[:2] / k.digest


def test_second_lookup_loads_what_the_first_built(cache_dir: Path) -> None:
    cache, build = KernelCache(cache_dir), Builder()
    first = cache.load_or_build(key(), build)
    again = KernelCache(cache_dir).load_or_build(key(), build)  # as another process would
    assert build.calls == 1
    assert again.payload == first.payload == build.payload
    assert again.meta == {"log": "ok", "calls": 1}
    assert (cache.hits, cache.misses) == (0, 1)


def test_key_digest_covers_parts_but_not_the_name() -> None:
    assert key(name="a.cu").digest == key(name="b.cu").digest
    assert key(source="a").digest != key(source="b").digest
    assert key(options="x").digest != key().digest
    assert KernelKey("nvrtc", "k", {"s": "a"}).digest != KernelKey("wgsl", "k", {"s": "a"}).digest


def test_a_build_error_stores_nothing(cache_dir: Path) -> None:
    cache = KernelCache(cache_dir)

    def fail() -> CachedKernel:
        raise RuntimeError("compile failed")

    with pytest.raises(RuntimeError, match="compile failed"):
        cache.load_or_build(key(), fail)
    build = Builder()
    cache.load_or_build(key(), build)
    assert build.calls == 1


def test_eviction_drops_the_least_recently_used_entry_at_the_bound(cache_dir: Path) -> None:
    size = len(kc.encode_entry(key("0"), Builder()()))
    cache = KernelCache(cache_dir, max_bytes=3 * size)
    keys = [key(str(i)) for i in range(3)]
    for i, k in enumerate(keys):
        cache.load_or_build(k, Builder())
        os.utime(entry_path(cache, k), ns=(i * 10**9, i * 10**9))  # distinct recency stamps
    cache.load_or_build(keys[0], Builder())  # a hit makes key 0 the most recent
    assert cache.hits == 1
    cache.load_or_build(key("3"), Builder())
    assert cache.evictions == 1
    assert not entry_path(cache, keys[1]).exists()  # the oldest stamp went
    for k in (keys[0], keys[2], key("3")):
        assert entry_path(cache, k).exists()
    assert cache.stats()["bytes"] <= cache.max_bytes
    assert cache.stats()["evictions"] == 1


def test_an_entry_larger_than_the_bound_is_not_stored(cache_dir: Path) -> None:
    cache = KernelCache(cache_dir, max_bytes=64)
    build = Builder(b"x" * 1000)
    cache.load_or_build(key(), build)
    cache.load_or_build(key(), build)
    assert build.calls == 2
    assert cache.stats()["entries"] == 0


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda data: data[:-3], "truncated entry"),
        (lambda data: data[:20], "truncated entry"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "checksum mismatch"),
        (lambda data: b"garbage" + data[7:], "not an entry"),
    ],
    ids=["truncated-payload", "truncated-header", "flipped-bit", "bad-magic"],
)
def test_a_damaged_entry_is_discarded_and_rebuilt_never_loaded(
    cache_dir: Path, cache_log: pytest.LogCaptureFixture, damage: object, why: str
) -> None:
    cache, build = KernelCache(cache_dir), Builder()
    cache.load_or_build(key(), build)
    path = entry_path(cache, key())
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    got = cache.load_or_build(key(), build)
    assert build.calls == 2 and got.meta["calls"] == 2  # rebuilt, not the damaged bytes
    assert f"corrupt entry ({why}" in cache_log.text
    assert kc.decode_entry(path.read_bytes(), key().digest).payload == build.payload


def test_an_entry_under_the_wrong_name_is_not_loaded(cache_dir: Path) -> None:
    cache = KernelCache(cache_dir)
    cache.load_or_build(key("a"), Builder())
    data = entry_path(cache, key("a")).read_bytes()
    target = entry_path(cache, key("b"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    build = Builder(b"b's image")
    assert cache.load_or_build(key("b"), build).payload == b"b's image"


def test_debug_line_says_why_it_compiled(
    cache_dir: Path, cache_log: pytest.LogCaptureFixture
) -> None:
    cache = KernelCache(cache_dir)
    cache.load_or_build(key("a", name="add.cu"), Builder())
    assert "compiling test add.cu instead of loading it: new key" in cache_log.text
    cache_log.clear()
    cache.load_or_build(key("b", name="add.cu", options="-O3"), Builder())
    assert "options, source changed since the entry last stored under this name" in cache_log.text
    cache_log.clear()
    cache.load_or_build(key("b", name="add.cu", options="-O3"), Builder())
    assert "loaded test add.cu from the cache" in cache_log.text


def test_stats_prune_clear(cache_dir: Path) -> None:
    cache = KernelCache(cache_dir)
    for name in "abc":
        cache.load_or_build(key(name), Builder())
    cache.load_or_build(key("a"), Builder())
    assert KernelCache(cache_dir).stats()["hits"] == 0  # hits are saved at exit...
    cache.save_stats()
    stats = KernelCache(cache_dir).stats()  # ...and shared through the directory
    assert (stats["entries"], stats["misses"], stats["hits"]) == (3, 3, 1)
    assert stats["bytes"] > 0 and stats["oldest"].endswith("Z")
    path = entry_path(cache, key("b"))
    path.write_bytes(path.read_bytes()[:-1])
    (cache_dir / "tmp" / "dead-writer").write_bytes(b"half")
    assert cache.prune() == {"corrupt": 1, "temp_files": 1, "evicted": 0}
    assert cache.clear() == 2
    stats = cache.stats()
    assert (stats["entries"], stats["hits"], stats["misses"], stats["oldest"]) == (0, 0, 0, None)


def test_stats_of_a_missing_directory_are_empty(tmp_path: Path) -> None:
    stats = KernelCache(tmp_path / "nowhere").stats()
    assert (stats["entries"], stats["bytes"], stats["hits"]) == (0, 0, 0)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("text", "value"), [("4096", 4096), ("512M", 512 << 20), ("2GiB", 2 << 30), ("1 k", 1024)]
)
def test_parse_size(text: str, value: int) -> None:
    assert kc.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "0", "-5", "lots", "12Q", "1.5G"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValidationError, match="not a positive size"):
        kc.parse_size(text)


def test_environment_picks_directory_bound_and_switch(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = kc.active_kernel_cache()
    assert cache is not None and cache.root == cache_dir
    assert cache.max_bytes == kc.DEFAULT_MAX_BYTES
    assert kc.active_kernel_cache() is cache
    monkeypatch.setenv(kc.ENV_MAX_BYTES, "1M")
    bounded = kc.active_kernel_cache()
    assert bounded is not None and bounded.max_bytes == 1 << 20
    monkeypatch.setenv(kc.ENV_SWITCH, "off")
    assert kc.active_kernel_cache() is None


def test_default_directory_is_under_the_xdg_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(kc.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert kc.default_dir() == Path("/somewhere/cache/tenferro-host/kernels")


@pytest.mark.parametrize(("var", "value"), [(kc.ENV_MAX_BYTES, "huge"), (kc.ENV_SWITCH, "maybe")])
def test_a_wrong_setting_warns_once_and_turns_the_cache_off(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    monkeypatch.setattr(kc, "_config_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kc.active_kernel_cache() is None
        assert kc.active_kernel_cache() is None
    assert [w.category for w in caught] == [KernelCacheWarning]
    assert var in str(caught[0].message)


def test_max_bytes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="max_bytes"):
        KernelCache(tmp_path, max_bytes=0)


def test_without_flock_there_is_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kc, "fcntl", None)  # as on a platform without fcntl
    assert kc.active_kernel_cache() is None


def test_the_provider_package_exports_the_cache_lazily(subproc: Subprocess) -> None:
    assert provider.KernelCache is kc.KernelCache and provider.KernelKey is kc.KernelKey
    assert provider.active_kernel_cache is kc.active_kernel_cache  # a function, not the module
    code = (
        "import sys, tenferro_host, tenferro_host.provider, tenferro_host.cuda, "
        "tenferro_host._cli; "
        "print([m for m in sys.modules if m.startswith('tenferro_host.provider._') "
        "and ('cache_' in m or 'kernel_cache' in m)])"
    )
    done = subproc.python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # importing the host does not pay for the cache

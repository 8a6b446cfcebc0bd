"""A cache directory that cannot be written: compiling goes on, with exactly one warning."""

from __future__ import annotations

import errno
import os
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
from support import cache_support
from support.subprocesses import Subprocess

from tenferro_host.provider import CachedKernel, KernelCache, KernelCacheWarning, KernelKey
from tenferro_host.provider import _kernel_cache_store as kc_store

cache_dir = cache_support.cache_dir


def key(source: str) -> KernelKey:
    return KernelKey("test", "k.cu", {"source": source})


def build_all(cache: KernelCache, sources: str) -> tuple[list[bytes], list[Any]]:
    """Load or build one kernel per letter; the payloads and the warnings raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [
            cache.load_or_build(key(s), lambda s=s: CachedKernel(s.encode() * 8, {})).payload
            for s in sources
        ]
    return got, [w for w in caught if issubclass(w.category, KernelCacheWarning)]


class ReadOnlyOs:
    """The real ``os``, except that opening a file to create or write it fails with EROFS."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def open(path: Any, flags: int, *args: Any) -> int:
        if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return os.open(path, flags, *args)


def test_a_read_only_directory_loads_what_it_has_and_compiles_the_rest(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    KernelCache(cache_dir).load_or_build(key("a"), lambda: CachedKernel(b"stored", {}))
    monkeypatch.setattr(kc_store, "os", ReadOnlyOs())  # the writing half
    cache = KernelCache(cache_dir)
    got, warned = build_all(cache, "abcd")
    assert got == [b"stored", b"b" * 8, b"c" * 8, b"d" * 8]
    assert len(warned) == 1 and "Read-only file system" in str(warned[0].message)
    assert (cache.hits, cache.misses) == (1, 3)


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root ignores directory permissions; the EROFS test covers root"
)
def test_a_directory_without_write_permission_compiles_with_one_warning(cache_dir: Path) -> None:
    cache_dir.mkdir()
    cache_dir.chmod(0o555)
    try:
        got, warned = build_all(KernelCache(cache_dir), "abc")
    finally:
        cache_dir.chmod(0o755)
    assert got == [b"a" * 8, b"b" * 8, b"c" * 8] and len(warned) == 1


def test_a_cache_path_that_is_a_file_compiles_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "not-a-dir"
    path.write_text("a file")
    got, warned = build_all(KernelCache(path), "abc")
    assert got == [b"a" * 8, b"b" * 8, b"c" * 8] and len(warned) == 1
    assert str(path) in str(warned[0].message)


def test_unreadable_stats_and_names_files_are_no_error(cache_dir: Path) -> None:
    cache = KernelCache(cache_dir)
    cache.load_or_build(key("a"), lambda: CachedKernel(b"x", {}))
    (cache_dir / "stats.json").write_text("{not json")
    for f in (cache_dir / "names").iterdir():
        f.write_text("[]")
    got, warned = build_all(cache, "ab")
    assert got == [b"x", b"b" * 8] and warned == []
    assert cache.stats()["misses"] == 1  # the counters start again


_FULL_DISK = textwrap.dedent(
    """
    import json, resource, signal, sys, warnings
    from tenferro_host.provider import _kernel_cache as kc

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
    out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if sys.argv[1] == "nvrtc":
            from tenferro_host.cuda import raw
            src = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] += %d.0f; }'
            for i in range(3):
                out.append(len(raw.nvrtc_compile(src % i, raw.NvrtcOptions(arch="sm_90")).data))
        else:
            cache = kc.active_kernel_cache()
            for i in range(3):
                key = kc.KernelKey("test", "k.cu", {"source": str(i)})
                out.append(len(cache.load_or_build(
                    key, lambda: kc.CachedKernel(b"x" * 100000, {})).payload))
    print(json.dumps({"sizes": out, "warnings": [str(w.message) for w in caught]}))
    """
)


@pytest.mark.parametrize("compiler", ["builder", "nvrtc"])
def test_a_full_disk_compiles_with_one_warning(
    cache_dir: Path, compiler: str, subproc: Subprocess
) -> None:
    if compiler == "nvrtc":
        pytest.importorskip("cuda.bindings.nvrtc")
    argv = [sys.executable, "-c", _FULL_DISK, compiler]
    result = subproc.json_of(argv, TENFERRO_CACHE_DIR=str(cache_dir))
    assert len(result["sizes"]) == 3 and all(n > 1024 for n in result["sizes"])
    (message,) = result["warnings"]
    assert "the disk is full" in message and str(cache_dir) in message
    assert not any(p.is_file() for p in (cache_dir / "entries").rglob("*"))
    assert list((cache_dir / "tmp").iterdir()) == []  # the failed temp files were removed

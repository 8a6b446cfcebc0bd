# DSL annotations (K.Array[K.f32]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,no-untyped-def,attr-defined,index"
"""The WebGPU JIT keeps generated WGSL in the kernel cache: fresh processes hit, edits miss."""

from __future__ import annotations

import dataclasses
import errno
import json
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import cache_support
from support.backends import available_host
from support.subprocesses import Subprocess
from tenferro_host_webgpu._wgsl import _shader as wgsl

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import KernelCache
from tenferro_host.provider import _kernel_cache as kc
from tenferro_host.provider import _kernel_cache_store as kc_store

cache_dir = cache_support.cache_dir
cache_log = cache_support.cache_log

pytestmark = pytest.mark.webgpu

KERNEL = textwrap.dedent(
    """
    from tenferro_host import kernel as K

    SCALE = 2

    @K.kernel
    def scaled_add(
        out: K.Array[K.f32], copy: K.Array[K.f32], lhs: K.Array[K.f32], rhs: K.Array[K.f32]
    ):
        i = K.ABSOLUTE_POS
        if i < out.len:
            out[i] = lhs[i] * SCALE + rhs[i]
            copy[i] = lhs[i]
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tenferro_host as tf
    from tenferro_host.provider import _kernel_cache as kc
    import kmod

    rt = tf.Host().backend("webgpu")
    x = rt.upload(np.arange(8, dtype=np.float32))
    out, copy = rt.zeros("float32", (8,)), rt.zeros("float32", (8,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.cache") as js:
        js.launch(kmod.scaled_add, 1, 8, out, copy, x, x)
    assert copy.download().tolist() == list(range(8))
    cache = kc.active_kernel_cache()
    print(json.dumps({"hits": cache.hits, "misses": cache.misses,
                      "out": out.download().tolist()}))
    """
)


@pytest.fixture
def host() -> tf.Host:
    return available_host("webgpu")


def child(tmp_path: Path, cache_dir: Path, seed: str) -> dict[str, Any]:
    """Launch ``kmod.scaled_add`` in a fresh process (own hash seed); its cache counts."""
    env = {kc.ENV_DIR: str(cache_dir), "PYTHONHASHSEED": seed}
    result: dict[str, Any] = Subprocess().json(CHILD, (tmp_path,), **env)
    return result


def test_a_fresh_process_hits_and_an_edit_misses(
    host: tf.Host, tmp_path: Path, cache_dir: Path
) -> None:
    module = tmp_path / "kmod.py"
    module.write_text(KERNEL)
    x = np.arange(8, dtype=np.float32)
    first = child(tmp_path, cache_dir, "1")
    # another string hash, which orders the set of written arrays {out, copy} the other way:
    again = child(tmp_path, cache_dir, "2")
    assert (first["hits"], first["misses"]) == (0, 1)
    assert (again["hits"], again["misses"]) == (1, 0)
    assert first["out"] == again["out"] == (3 * x).tolist()
    stats = KernelCache(cache_dir).stats()
    assert (stats["entries"], stats["hits"], stats["misses"]) == (1, 1, 1)

    module.write_text(KERNEL.replace("* SCALE + rhs[i]", "* SCALE - rhs[i]"))
    edited = child(tmp_path, cache_dir, "3")
    assert (edited["hits"], edited["misses"]) == (0, 1) and edited["out"] == x.tolist()
    # a module-level value is folded into the kernel, invisible in its text: still a miss
    module.write_text(KERNEL.replace("SCALE = 2", "SCALE = 5"))
    rescaled = child(tmp_path, cache_dir, "4")
    assert (rescaled["hits"], rescaled["misses"]) == (0, 1) and rescaled["out"] == (6 * x).tolist()


# -- in one process: each new runtime has its own, empty in-memory pipeline cache -----------------

FACTOR = 2.0
EXPECTED = [0.0, 2.0, 4.0, 6.0]


@K.kernel
def twice(out: K.Array[K.f32], a: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = a[i] * FACTOR


def launch(rt: Any) -> list[float]:
    a = rt.upload(np.arange(4, dtype=np.float32))
    out = rt.zeros("float32", (4,))
    with rt.session() as s:
        ex = tf.webgpu.exec_session(s)
        assert ex is not None
        with ex.jit("tests.cache") as js:
            js.launch(twice, 1, 4, out, a)
    result: list[float] = out.download().tolist()
    return result


@pytest.fixture
def new_rt(host: tf.Host) -> Callable[[], Any]:
    """Makes a new runtime of the webgpu adapter: nothing in its pipeline cache."""
    return lambda: host.new_backend("webgpu")


@pytest.fixture
def cache(cache_dir: Path) -> kc.KernelCache:
    found = kc.active_kernel_cache()
    assert found is not None
    return found


def the_entry(cache_dir: Path) -> Path:
    (found,) = [p for p in (cache_dir / "entries").rglob("*") if p.is_file()]
    return found


def the_key(cache_dir: Path) -> kc.KernelKey:
    """The key of the one cached kernel, from the parts stored under the kernel's name."""
    (stored,) = (cache_dir / "names").iterdir()
    last = json.loads(stored.read_text())
    return kc.KernelKey(last["kind"], last["name"], last["parts"])


def test_a_hit_skips_generation_and_a_memory_hit_skips_the_disk(
    new_rt: Callable[[], Any], cache: kc.KernelCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = new_rt()
    assert launch(first) == EXPECTED and (cache.hits, cache.misses) == (0, 1)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("called on a hit")

    with monkeypatch.context() as mp:
        mp.setattr(kc.KernelCache, "load_or_build", refuse)
        assert launch(first) == EXPECTED  # the runtime's pipeline cache answers
    with monkeypatch.context() as mp:
        mp.setattr(wgsl, "generate", refuse)
        assert launch(new_rt()) == EXPECTED  # the WGSL comes from the disk
    assert (cache.hits, cache.misses) == (1, 1)


@pytest.mark.parametrize(
    "change",
    [{"name": "another adapter"}, {"api": "Metal"}, "shader_f16"],
    ids=["adapter-name", "backend", "shader-f16"],
)
def test_another_adapter_or_feature_misses(
    new_rt: Callable[[], Any], cache: kc.KernelCache, change: Any
) -> None:
    assert launch(new_rt()) == EXPECTED
    other = new_rt()
    info = other.device_info
    fields = {"shader_f16": not info.shader_f16} if change == "shader_f16" else change
    other._info = dataclasses.replace(info, **fields)
    assert launch(other) == EXPECTED
    assert (cache.hits, cache.misses) == (0, 2)
    assert len([p for p in (cache.root / "entries").rglob("*") if p.is_file()]) == 2


def test_a_corrupt_entry_regenerates(
    new_rt: Callable[[], Any],
    cache: kc.KernelCache,
    cache_dir: Path,
    cache_log: pytest.LogCaptureFixture,
) -> None:
    assert launch(new_rt()) == EXPECTED
    entry = the_entry(cache_dir)
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0xFF  # a byte of the WGSL text: the checksum no longer matches
    entry.write_bytes(bytes(data))
    assert launch(new_rt()) == EXPECTED
    assert (cache.hits, cache.misses) == (0, 2)
    assert any("corrupt entry (checksum mismatch)" in r.getMessage() for r in cache_log.records)
    assert launch(new_rt()) == EXPECTED and cache.hits == 1  # the regenerated entry is whole


def test_an_entry_without_the_binding_layout_regenerates(
    new_rt: Callable[[], Any], cache: kc.KernelCache, cache_dir: Path
) -> None:
    assert launch(new_rt()) == EXPECTED
    key = the_key(cache_dir)
    entry = the_entry(cache_dir)
    assert entry.name == key.digest
    entry.write_bytes(kc.encode_entry(key, kc.CachedKernel(b"fn main() {}", {"writable": "x"})))
    with pytest.warns(kc.KernelCacheWarning, match="holds no WGSL with its bindings"):
        assert launch(new_rt()) == EXPECTED  # whole and checksummed, no layout: generated again
    assert cache.hits == 1
    assert launch(new_rt()) == EXPECTED and cache.hits == 2  # the regenerated entry is stored


def test_a_checksummed_entry_the_adapter_refuses_is_regenerated_once(
    new_rt: Callable[[], Any], cache: kc.KernelCache, cache_dir: Path
) -> None:
    """A valid checksum over broken WGSL (an older buggy build, a hand edit) is dropped with one
    warning and generated again, not a CompileError in every later process."""
    assert launch(new_rt()) == EXPECTED
    key = the_key(cache_dir)
    entry = the_entry(cache_dir)
    good = entry.read_bytes()
    meta = {"writable": [True, True, False]}
    entry.write_bytes(kc.encode_entry(key, kc.CachedKernel(b"fn main( {", meta)))
    with pytest.warns(kc.KernelCacheWarning, match="the adapter refused its WGSL") as caught:
        assert launch(new_rt()) == EXPECTED
    assert len([w for w in caught if issubclass(w.category, kc.KernelCacheWarning)]) == 1
    assert entry.read_bytes() == good  # the regenerated WGSL replaced the broken one
    assert launch(new_rt()) == EXPECTED and cache.hits == 2


def test_a_refused_entry_that_cannot_be_removed_still_runs(
    new_rt: Callable[[], Any],
    cache: kc.KernelCache,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read-only cache keeps the broken entry: each launch generates the WGSL afresh."""
    assert launch(new_rt()) == EXPECTED
    key = the_key(cache_dir)
    broken = kc.encode_entry(key, kc.CachedKernel(b"fn main( {", {"writable": [True, False]}))
    the_entry(cache_dir).write_bytes(broken)

    def read_only(path: Path) -> int:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(kc_store, "acquire", read_only)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert launch(new_rt()) == EXPECTED
        assert launch(new_rt()) == EXPECTED
    assert the_entry(cache_dir).read_bytes() == broken
    assert any("Read-only file system" in str(w.message) for w in caught)


@pytest.mark.parametrize("mode", [0o700, 0o777, 0o770])
def test_a_planted_entry_runs_only_from_a_private_directory(
    new_rt: Callable[[], Any], cache_dir: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    """WGSL that computes x * 100, stored under the kernel's key with a valid checksum: loaded
    from the user's private cache (the control: the test can see a planted kernel run), never
    from a directory group or others can write, where the fresh compile runs instead."""
    assert launch(new_rt()) == EXPECTED
    key = the_key(cache_dir)
    entry = the_entry(cache_dir)
    found = kc.decode_entry(entry.read_bytes(), key.digest)
    text = found.payload.decode()
    assert "2.0f" in text
    planted = kc.encode_entry(
        key, kc.CachedKernel(text.replace("2.0f", "100.0f").encode(), found.meta)
    )
    entry.write_bytes(planted)
    cache_dir.chmod(mode)
    monkeypatch.setattr(kc, "_caches", {})  # as in a new process: the directory not checked yet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = launch(new_rt())
    warned = [str(w.message) for w in caught if issubclass(w.category, kc.KernelCacheWarning)]
    if mode == 0o700:
        assert got == [0.0, 100.0, 200.0, 300.0] and warned == []
        return
    assert got == EXPECTED  # the fresh compile ran, not the planted entry
    assert len(warned) == 1, warned
    assert f"{cache_dir} is writable by" in warned[0] and f"mode {mode:04o}" in warned[0]
    assert f"chmod 700 {cache_dir}" in warned[0]
    assert entry.read_bytes() == planted  # a refused directory is not written either


def test_cache_off_touches_no_directory(
    new_rt: Callable[[], Any], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kc.ENV_SWITCH, "off")
    assert launch(new_rt()) == EXPECTED
    assert launch(new_rt()) == EXPECTED
    assert not cache_dir.exists()


def test_an_unusable_directory_warns_once_and_generates(
    new_rt: Callable[[], Any], cache_dir: Path
) -> None:
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    cache_dir.write_text("a file where the cache directory should be")
    with pytest.warns(kc.KernelCacheWarning, match="cannot be used") as warned:
        assert launch(new_rt()) == EXPECTED
        assert launch(new_rt()) == EXPECTED
    assert len(warned) == 1

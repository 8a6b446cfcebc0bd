"""NVRTC compiles through the cache (compile-only, no GPU): what recompiles and what loads."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from support import cache_support
from support.subprocesses import Subprocess

pytest.importorskip("cuda.bindings.nvrtc")

from tenferro_host_cuda._nvrtc import compile_source
from tenferro_host_cuda._nvrtc_cache import headers_digest

from tenferro_host.cuda import raw
from tenferro_host.errors import CompileError
from tenferro_host.provider import KernelCache

cache_dir = cache_support.cache_dir
cache = cache_support.cache
cache_log = cache_support.cache_log

ADD = (
    'extern "C" __global__ void add(float* o, const float* a, int n) {\n'
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + VALUE; }\n"
)
TEMPLATE = "template <typename T> __global__ void scale(T* p) { p[threadIdx.x] *= T(2); }\n"
SM90 = raw.NvrtcOptions(arch="sm_90")


def with_header(tmp_path: Path, value: str) -> raw.NvrtcOptions:
    inc = tmp_path / "inc"
    (inc / "nested").mkdir(parents=True, exist_ok=True)
    (inc / "value.h").write_text('#pragma once\n#include "nested/inner.h"\n')
    (inc / "nested" / "inner.h").write_text(f"#define VALUE {value}\n")
    return raw.NvrtcOptions(arch="sm_90", include_dirs=[str(inc)])


def test_the_same_compile_loads_the_same_image(cache: KernelCache) -> None:
    src = ADD.replace("VALUE", "1.0f")
    first = raw.nvrtc_compile(src, SM90)
    again = raw.nvrtc_compile(src, SM90)
    assert cache.misses == 1 and cache.hits == 1
    assert again == first and again.kind == "cubin" and again.arch == "sm_90"


def test_the_same_source_under_another_file_name_hits(cache: KernelCache) -> None:
    src = ADD.replace("VALUE", "1.0f")
    compile_source(src, SM90, name="one.cu")
    compile_source(src, SM90, name="other.cu")
    assert (cache.misses, cache.hits) == (1, 1)


def test_a_changed_nested_header_recompiles(
    cache: KernelCache, tmp_path: Path, cache_log: pytest.LogCaptureFixture
) -> None:
    src = "#include <value.h>\n" + ADD
    first = raw.nvrtc_compile(src, with_header(tmp_path, "1.0f"))
    raw.nvrtc_compile(src, with_header(tmp_path, "1.0f"))
    assert cache.misses == 1
    changed = raw.nvrtc_compile(src, with_header(tmp_path, "2.0f"))
    assert cache.misses == 2 and changed.data != first.data
    assert "headers changed" in cache_log.text


@pytest.mark.parametrize(
    "other",
    [
        raw.NvrtcOptions(arch="sm_90", defines={"EXTRA": 1}),
        raw.NvrtcOptions(arch="sm_90", std="c++17"),
        raw.NvrtcOptions(arch="sm_90", extra=["--use_fast_math"]),
        raw.NvrtcOptions(arch="sm_80"),
        raw.NvrtcOptions(arch="compute_90"),
    ],
    ids=["define", "std", "extra", "arch", "ptx"],
)
def test_an_option_or_target_change_recompiles(cache: KernelCache, other: raw.NvrtcOptions) -> None:
    src = ADD.replace("VALUE", "1.0f")
    raw.nvrtc_compile(src, SM90)
    changed = raw.nvrtc_compile(src, other)
    assert cache.misses == 2
    assert other.arch is not None and changed.arch == other.arch
    assert changed.kind == ("ptx" if other.arch.startswith("compute_") else "cubin")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_dsl_kernels_generated_cuda_c_is_cached(cache: KernelCache, dtype: str) -> None:
    from ext_add_kernel import dsl
    from tenferro_host_cuda_jit._codegen import generate

    import tenferro_host as tf
    from tenferro_host.kernel._kernel import ArrayDesc

    spec = dsl.add_kernel.specialize(
        [ArrayDesc(getattr(tf, dtype), 1)] * 3, target="cuda", features=("sm_90",)
    )
    source = generate(spec).source
    first = compile_source(source, SM90, name="tests.cache.cu")
    again = compile_source(generate(spec).source, SM90, name="tests.cache.cu")
    assert (cache.misses, cache.hits) == (1, 1) and again == first


def test_the_environment_bound_evicts_the_least_recently_used_image(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = [ADD.replace("VALUE", f"{i}.0f") for i in range(3)]
    raw.nvrtc_compile(sources[0], SM90)
    one = KernelCache(cache_dir).stats()["bytes"]
    monkeypatch.setenv("TENFERRO_CACHE_MAX_BYTES", str(2 * one + one // 2))  # room for two
    bounded = KernelCache(cache_dir, 2 * one + one // 2)
    raw.nvrtc_compile(sources[1], SM90)
    raw.nvrtc_compile(sources[0], SM90)  # a hit: 0 is now more recent than 1
    raw.nvrtc_compile(sources[2], SM90)  # evicts 1
    stats = bounded.stats()
    assert stats["entries"] == 2 and stats["evictions"] == 1 and stats["bytes"] <= 2.5 * one
    from tenferro_host.provider import _kernel_cache as kc

    cache = kc.active_kernel_cache()
    assert cache is not None
    before = cache.misses
    raw.nvrtc_compile(sources[0], SM90)
    raw.nvrtc_compile(sources[2], SM90)
    assert cache.misses == before
    raw.nvrtc_compile(sources[1], SM90)
    assert cache.misses == before + 1


def test_log_and_lowered_names_come_back_from_the_cache(cache: KernelCache) -> None:
    opts = raw.NvrtcOptions(arch="sm_90", name_expressions=["scale<float>"])
    noisy = TEMPLATE + "__global__ void warn() { int unused = 1; }\n"
    first = raw.nvrtc_compile(noisy, opts)
    again = raw.nvrtc_compile(noisy, opts)
    assert cache.misses == 1
    assert again.lowered_names == first.lowered_names == {"scale<float>": "_Z5scaleIfEvPT_"}
    assert "unused" in again.log and again.log == first.log


def test_a_failed_compile_is_not_cached(cache: KernelCache) -> None:
    for _ in range(2):
        with pytest.raises(CompileError) as info:
            raw.nvrtc_compile('extern "C" __global__ void k() { nope; }', SM90)
        assert "nope" in info.value.log
    assert cache.misses == 2 and cache.stats()["entries"] == 0


def test_a_macro_include_is_compiled_every_time(cache: KernelCache, tmp_path: Path) -> None:
    (tmp_path / "v.h").write_text("#define VALUE 3.0f\n")
    src = '#define HEADER "v.h"\n#include HEADER\n' + ADD
    opts = raw.NvrtcOptions(arch="sm_90", include_dirs=[str(tmp_path)])
    for _ in range(2):
        raw.nvrtc_compile(src, opts)
    assert (cache.hits, cache.misses, cache.stats()["entries"]) == (0, 0, 0)


def test_cache_off_compiles_every_time(cache: KernelCache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENFERRO_CACHE", "off")
    src = ADD.replace("VALUE", "1.0f")
    assert raw.nvrtc_compile(src, SM90) == raw.nvrtc_compile(src, SM90)
    monkeypatch.delenv("TENFERRO_CACHE")
    assert cache.stats()["entries"] == 0


def test_headers_follow_quoted_includes_from_the_including_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "sub" / "b.h").write_text("one\n")
    src = b'#include "sub/a.h"\n#include <cuda_fp16.h>\n'
    before = headers_digest(src, str(tmp_path / "k.cu"), [])
    (tmp_path / "sub" / "b.h").write_text("two\n")
    assert headers_digest(src, str(tmp_path / "k.cu"), []) != before
    # an angle include never looks in the source's directory: not found there, it is taken as
    # an NVRTC builtin (covered by the compiler's identity), so editing the file changes nothing
    angle = headers_digest(b"#include <a.h>\n", str(tmp_path / "sub" / "k.cu"), [])
    (tmp_path / "sub" / "a.h").write_text("changed\n")
    assert headers_digest(b"#include <a.h>\n", str(tmp_path / "sub" / "k.cu"), []) == angle
    assert headers_digest(b"#include <a.h>\n", "k.cu", [str(tmp_path / "sub")]) != angle


def test_the_compiler_identity_names_the_library_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stable for one file; another size or mtime (a patch release) is another compiler."""
    from tenferro_host_cuda import _nvrtc_cache as nvrtc_cache

    lib = tmp_path / "libnvrtc.so.13"
    lib.write_bytes(b"\x7fELF fake nvrtc")
    os.utime(lib, ns=(1_000_000_000, 1_000_000_000))
    monkeypatch.setattr(nvrtc_cache, "_wheel_library", lambda: str(lib))
    monkeypatch.setattr(nvrtc_cache, "_loaded", None)
    first = nvrtc_cache.compiler_identity()
    assert first == nvrtc_cache.compiler_identity()
    assert str(lib.resolve()) in first
    os.utime(lib, ns=(1_000_000_000, 2_000_000_000))
    touched = nvrtc_cache.compiler_identity()
    assert touched != first
    lib.write_bytes(b"\x7fELF fake nvrtc, patched")
    os.utime(lib, ns=(1_000_000_000, 2_000_000_000))
    assert nvrtc_cache.compiler_identity() not in (first, touched)


def test_the_wheel_identity_is_the_loaded_library_identity(subproc: Subprocess) -> None:
    """Found without loading NVRTC or once it is loaded: one key, so a CUDA session (which
    loads NVRTC to probe the device) and a compile-only process share their entries."""
    code = textwrap.dedent(
        """
        import sys
        from tenferro_host_cuda import _nvrtc_cache as nvrtc_cache
        from tenferro_host_cuda._nvrtc import _nvrtc
        wheel = nvrtc_cache._wheel_library()
        before = nvrtc_cache.compiler_identity()
        assert wheel is None or "cuda.bindings.nvrtc" not in sys.modules, "NVRTC was loaded"
        _nvrtc().nvrtcVersion()
        assert nvrtc_cache.compiler_identity() == before, (before, nvrtc_cache._loaded_identity())
        print(wheel is not None)
        """
    )
    done = subproc.python(code)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() != "True":
        pytest.skip("NVRTC is not from the nvidia-cuda-nvrtc wheel here")


_HIT = textwrap.dedent(
    """
    import json, sys
    from tenferro_host.cuda import raw
    from tenferro_host.provider import _kernel_cache as kc
    from tenferro_host_cuda._nvrtc_cache import _wheel_library
    wheel = _wheel_library() is not None
    image = raw.nvrtc_compile(sys.argv[1], raw.NvrtcOptions(arch="sm_90"))
    cache = kc.active_kernel_cache()
    print(json.dumps({"hits": cache.hits, "misses": cache.misses, "kind": image.kind,
                      "elf": image.data[:4] == b"\\x7fELF",
                      "nvrtc_imported": "cuda.bindings.nvrtc" in sys.modules, "wheel": wheel}))
    """
)


def test_a_fresh_process_hit_does_not_load_nvrtc(cache_dir: Path, subproc: Subprocess) -> None:
    """The first process compiles (a miss that loads NVRTC), the second loads the image
    without importing ``cuda.bindings.nvrtc``: the 15 ms of a first hit on the H200."""
    src = ADD.replace("VALUE", "3.0f")
    argv = [sys.executable, "-c", _HIT, src]
    miss, hit = (subproc.json_of(argv, TENFERRO_CACHE_DIR=str(cache_dir)) for _ in range(2))
    assert (miss["misses"], miss["hits"], miss["nvrtc_imported"]) == (1, 0, True)
    assert miss["kind"] == "cubin" and miss["elf"]
    assert (hit["misses"], hit["hits"], hit["elf"]) == (0, 1, True)
    if not hit["wheel"]:
        pytest.skip("NVRTC is not from the nvidia-cuda-nvrtc wheel here: a hit loads it")
    assert not hit["nvrtc_imported"], "a persistent hit loaded NVRTC"


def test_a_checksummed_entry_without_image_metadata_is_compiled_again(
    cache: KernelCache, cache_dir: Path
) -> None:
    """An entry whose checksum holds but whose metadata is not an image's (an older build's)
    is dropped with one warning and compiled again, not a KeyError in every later process."""
    from tenferro_host.provider import CachedKernel, KernelCacheWarning, KernelKey
    from tenferro_host.provider import _kernel_cache as kc

    src = ADD.replace("VALUE", "3.0f")
    first = raw.nvrtc_compile(src, SM90)
    (stored,) = (cache_dir / "names").iterdir()
    last = json.loads(stored.read_text())
    key = KernelKey(last["kind"], last["name"], last["parts"])
    entry = next(p for p in (cache_dir / "entries").rglob("*") if p.name == key.digest)
    entry.write_bytes(kc.encode_entry(key, CachedKernel(first.data, {"log": ""})))
    with pytest.warns(KernelCacheWarning, match="lacks the image's kind") as caught:
        again = raw.nvrtc_compile(src, SM90)
    assert again == first
    assert len([w for w in caught if issubclass(w.category, KernelCacheWarning)]) == 1
    stored_again = kc.decode_entry(entry.read_bytes(), key.digest)  # the fresh compile's entry
    assert set(stored_again.meta) == {"kind", "arch", "log", "lowered_names"}

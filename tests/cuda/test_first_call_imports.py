"""What a fresh process's first compile hit imports, without a GPU (NVRTC compiles the entry the
hit loads): installed without bytecode, every module of the project a first call imports is
compiled from source inside that call, so the call imports the kernel cache's reading half and
the NVRTC key and nothing else of the project — not the cache's writing half, nor anything the
session, the runtime or a launch already needed. A count of modules, never a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_FIRST_HIT = textwrap.dedent(
    """
    import json, sys
    import cuda.bindings.driver, cuda.bindings.nvrtc  # what a CUDA runtime has imported by then
    import tenferro_host as tf
    from tenferro_host.cuda import raw
    from tenferro_host_cuda._nvrtc import compile_source

    tf.Host()
    source = open(sys.argv[1]).read()
    before = set(sys.modules)
    compile_source(source, raw.NvrtcOptions(arch="sm_90"), name="add.cu")
    new = sorted(m for m in set(sys.modules) - before if m.startswith("tenferro"))
    size = sum(len(open(sys.modules[m].__file__, "rb").read()) for m in new)
    from tenferro_host.provider import active_kernel_cache
    cache = active_kernel_cache()
    print(json.dumps({"imported": new, "bytes": size, "hits": cache.hits, "misses": cache.misses}))
    """
)

#: The reading half of the persistent cache (directory checks, entry format, settings) and the
#: NVRTC key: 35.6 KB of source, 46.6 KB when the writing half came along (a budget in bytes of
#: source, which is what a process without bytecode compiles).
FIRST_HIT_SOURCE_BYTES = 40_000
FIRST_HIT_IMPORTS = [
    "tenferro_host.provider._cache_dir",
    "tenferro_host.provider._cache_entry",
    "tenferro_host.provider._cache_log",
    "tenferro_host.provider._cache_settings",
    "tenferro_host.provider._kernel_cache",
    "tenferro_host_cuda._nvrtc_cache",
]


def _run(source: Path, cache_dir: Path) -> dict[str, object]:
    env = {**os.environ, "TENFERRO_CACHE_DIR": str(cache_dir), "TENFERRO_CACHE": "on"}
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_HIT, str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_first_compile_hit_imports_only_the_cache_reader_and_the_key(tmp_path: Path) -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    source = tmp_path / "add.cu"
    source.write_text(
        'extern "C" __global__ void add(float* o, const float* a, int n) {\n'
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) o[i] = a[i] + 1.0f;\n"
        "}\n"
    )
    built = _run(source, tmp_path / "cache")  # compiles and stores: the writing half comes too
    assert (
        built["misses"] == 1 and "tenferro_host.provider._kernel_cache_store" in built["imported"]
    )
    hit = _run(source, tmp_path / "cache")
    assert (hit["hits"], hit["misses"]) == (1, 0)
    assert hit["imported"] == FIRST_HIT_IMPORTS
    assert hit["bytes"] <= FIRST_HIT_SOURCE_BYTES, hit["bytes"]

"""On a CUDA device: a second process loads the raw and the DSL kernels instead of compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import cache_support

import tenferro_host as tf

cache_dir = cache_support.cache_dir

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

_CHILD = textwrap.dedent(
    """
    import json
    import numpy as np
    import tenferro_host as tf
    from ext_add_kernel import dsl
    from tenferro_host.cuda import raw
    from tenferro_host.provider import _kernel_cache as kc

    SRC = r'''
    extern "C" __global__ void twice(float* out, const float* a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = 2.0f * a[i];
    }
    '''
    rt = tf.Host().backend("cuda")
    a = rt.upload(np.arange(1024, dtype=np.float32))
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        with ex.raw("tests.cache") as rs:
            fn = rs.compile_nvrtc(SRC).function("twice")
            out = rs.alloc_output(tf.float32, (1024,))
            rs.launch(fn, raw.LaunchConfig.flat(1024, 256),
                      [rs.tensor_mut(out), rs.tensor(a), raw.i32(1024)])
        summed = dsl.add(ex, a, a)
        expected = 2 * np.arange(1024, dtype=np.float32)
        raw_ok = bool((out.download() == expected).all())
        dsl_ok = bool((summed.download() == expected).all())
    cache = kc.active_kernel_cache()
    print(json.dumps({"hits": cache.hits, "misses": cache.misses, "raw": raw_ok, "dsl": dsl_ok}))
    """
)


def test_a_fresh_process_loads_the_raw_and_dsl_kernels(cache_dir: Path) -> None:
    status = tf.Host().backend_status("cuda")
    if not status.available:
        pytest.skip(f"no CUDA device: {status.reason}")
    env = {**os.environ, "TENFERRO_CACHE_DIR": str(cache_dir)}
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["raw"] and first["dsl"] and second["raw"] and second["dsl"]
    assert first["misses"] >= 2 and first["hits"] == 0
    assert (second["misses"], second["hits"]) == (0, first["misses"])


_SCALE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tenferro_host as tf
    from tenferro_host.cuda import raw

    SRC = r'''
    extern "C" __global__ void scale(float* out, const float* a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = FACTOR * a[i];
    }
    '''
    rt = tf.Host().backend("cuda")
    a = rt.upload(np.arange(256, dtype=np.float32))
    with rt.session() as s, tf.cuda.exec_session(s).raw("tests.cache") as rs:
        fn = rs.compile_nvrtc(SRC.replace("FACTOR", sys.argv[1])).function("scale")
        out = rs.alloc_output(tf.float32, (256,))
        rs.launch(fn, raw.LaunchConfig.flat(256, 256),
                  [rs.tensor_mut(out), rs.tensor(a), raw.i32(256)])
    print(json.dumps(out.download()[:4].tolist()))
    """
)


@pytest.mark.parametrize("mode", [0o700, 0o777])
def test_a_planted_cubin_runs_only_from_a_private_directory(tmp_path: Path, mode: int) -> None:
    """The CUBIN of ``out = 100 * a`` stored, with a valid checksum, under the key of
    ``out = 2 * a``: loaded from a private cache (the control), never from a shared one."""
    from tenferro_host.provider import _kernel_cache as kc

    status = tf.Host().backend_status("cuda")
    if not status.available:
        pytest.skip(f"no CUDA device: {status.reason}")

    def scale(cache: Path, factor: str) -> tuple[list[float], str]:
        env = {**os.environ, "TENFERRO_CACHE_DIR": str(cache)}
        done = subprocess.run(
            [sys.executable, "-c", _SCALE, factor],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr

    victim, other = tmp_path / "victim", tmp_path / "other"
    assert scale(victim, "2.0f")[0] == [0.0, 2.0, 4.0, 6.0]
    assert scale(other, "100.0f")[0] == [0.0, 100.0, 200.0, 300.0]
    (names,) = (victim / "names").iterdir()
    last = json.loads(names.read_text())
    key = kc.KernelKey(last["kind"], last["name"], last["parts"])
    (entry,) = [p for p in (victim / "entries").rglob("*") if p.is_file()]
    (theirs,) = [p for p in (other / "entries").rglob("*") if p.is_file()]
    hundred = kc.decode_entry(theirs.read_bytes(), theirs.name)
    entry.write_bytes(kc.encode_entry(key, hundred))
    victim.chmod(mode)
    got, stderr = scale(victim, "2.0f")
    if mode == 0o700:
        assert got == [0.0, 100.0, 200.0, 300.0]  # the planted image ran: the test can see it
    else:
        assert got == [0.0, 2.0, 4.0, 6.0]  # compiled afresh
        assert "KernelCacheWarning" in stderr and f"{victim} is writable by" in stderr

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

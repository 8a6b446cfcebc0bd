"""The autotuned f32 GEMM (``tenferro_host.benchmarks.gemm``) equals numpy with every config
(partial tiles at each edge) on the interpreter and compiles for sm_90 with 16-byte shared
reads; tuned with a clock the test controls, the launch runs the winner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import cache_support
from support.nvrtc_compile import compile_sm90
from tenferro_host_cuda_jit._codegen import generate

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.benchmarks import gemm

cache_dir = cache_support.cache_dir
RNG = np.random.default_rng(26)


def product(rt: Any, tuned: K.Autotuned, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    with rt.session() as s, s.exec_session().jit("test.gemm") as js:
        c = js.alloc_output("float32", (m, n))
        gemm.TILED_GEMM.launch_tuned(js, c, rt.upload(a), rt.upload(b), tuned)
    return c.download(), a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("config", gemm.GEMM_CONFIGS, ids=repr)
def test_every_config_equals_numpy_on_the_interpreter(config: K.Config) -> None:
    tuned = K.autotune([config], key=["a", "b"])(gemm.tiled_gemm)
    got, want = product(tf.Host().backend("cpu"), tuned, 70, 45, 133)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_tuned_gemm_runs_the_winner() -> None:
    last = len(gemm.GEMM_CONFIGS) - 1

    def timer(js: Any, config: K.Config, run: Callable[[], None]) -> float:
        run()
        return 1.0 if config == gemm.GEMM_CONFIGS[last] else 2.0

    tuned = gemm.TILED_GEMM.autotuned(timer=timer, warmup=1, repeats=1)
    got, want = product(tf.Host().backend("cpu"), tuned, 33, 17, 20)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    (choice,) = tuned.choices().values()
    assert (choice.index, choice.source) == (last, "tuned")


@pytest.mark.parametrize("config", gemm.GEMM_CONFIGS, ids=repr)
def test_every_config_compiles_for_sm90_with_vector_shared_reads(config: K.Config) -> None:
    descs = [K.ArrayDesc(dtypes.float32, 2)] * 3
    spec = gemm.tiled_gemm.specialize(descs, config.constants, target="cuda", features=("sm_90",))
    source = generate(spec).source
    assert "float4" in source
    assert compile_sm90(source) > 0

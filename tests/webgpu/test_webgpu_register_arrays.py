"""Register arrays and unrolled loops on WebGPU, against the interpreter: the small kernels
exactly, the register-tiled GEMM within WGSL's fma rule (it may round twice)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from support import launch_checks as lc
from support import register_kernels as rk
from support.webgpu_harness import View, assert_same

from tenferro_host.benchmarks import gemm_registers as gr

RNG = np.random.default_rng(37)


def test_register_arrays_and_static_range(rt: Any) -> None:
    lc.check_register_arrays(partial(assert_same, rt), RNG, rows=(1, 4), picks=(2, 2))


@pytest.mark.parametrize(("m", "n", "k", "config"), [(128, 128, 16, 0), (100, 70, 13, 3)])
def test_the_register_gemm(rt: Any, m: int, n: int, k: int, config: int) -> None:
    cfg = gr.REGISTER_CONFIGS[config]
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)

    def view(x: np.ndarray) -> View:
        return View(x.ravel(order="F"), 0, x.shape, (1, x.shape[0]))

    c = view(np.zeros((m, n), np.float32))
    count = gr.register_gemm_count(m, n, k, cfg)
    assert_same(rt, gr.register_gemm, count, cfg.dim, c, view(a), view(b), rtol=1e-5,
                atol=1e-5 * k, **cfg.constants)  # fmt: skip


def test_constant_register_indices_reach_wgsl_as_literals() -> None:
    """A constant index, hidden like every constant, would index the array at run time (in
    memory, not registers: the H100's Vulkan driver ran the GEMM at 0.06x its CUDA speed)."""
    from support.dsl_harness import desc
    from tenferro_host_webgpu._wgsl._shader import generate

    x = View.compact(np.zeros(8, np.float32))
    spec = rk.scaled_row_sums.specialize([desc(x), desc(x)], {}, "webgpu")
    source = generate(spec, (8, 1, 1), (0, 1), False).source
    indices = [line.split("r_r[", 1)[1].split("]", 1)[0] for line in source.splitlines()
               if "r_r[" in line]  # fmt: skip
    assert sorted(set(indices)) == [f"{k}u" for k in range(8)], indices

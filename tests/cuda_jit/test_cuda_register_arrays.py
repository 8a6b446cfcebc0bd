"""Register arrays, unrolled loops and the register-tiled GEMM through the CUDA JIT session:
on the fake raw seam (CPU) and, marked ``gpu``/``cuda``, on a CUDA device, against the
interpreter (the small kernels) and numpy (the GEMM, including a 4096^2 x 512 product on the
GPU with blocks on the edges)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from support import launch_checks as lc
from support import register_kernels as rk
from support.cuda_jit_harness import Target, View, assert_same, on_target

from tenferro_host.benchmarks import gemm_registers as gr

RNG = np.random.default_rng(38)


def test_register_arrays_and_static_range(target: Target) -> None:
    lc.check_register_arrays(partial(assert_same, target), RNG, rows=(2, 4), picks=(2, 4))
    assert_same(target, rk.prefix_in_registers, 1, 4, View.compact(np.zeros(24)),
                View.compact(RNG.standard_normal(24)))  # fmt: skip


@pytest.mark.parametrize("config", range(len(gr.REGISTER_CONFIGS)))
def test_the_register_gemm(target: Target, config: int) -> None:
    m, n, k = (1030, 520, 300) if target.name == "cuda" else (130, 66, 9)
    cfg = gr.REGISTER_CONFIGS[config]
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)

    def view(x: np.ndarray) -> View:
        return View(x.ravel(order="F"), 0, x.shape, (1, x.shape[0]))

    count = gr.register_gemm_count(m, n, k, cfg)
    (c, _, _) = on_target(target, gr.register_gemm, count, cfg.dim,
                          view(np.zeros((m, n), np.float32)), view(a), view(b),
                          **cfg.constants)  # fmt: skip
    np.testing.assert_allclose(c.reshape((m, n), order="F"), a @ b, rtol=1e-4, atol=1e-4 * k)

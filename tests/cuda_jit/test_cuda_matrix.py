"""The f16 tensor-core GEMM through the CUDA JIT session (PTX ``wmma``; the fake raw seam on
CPU, and a GPU): numpy's product, exactly where every partial sum is exact."""

from __future__ import annotations

import numpy as np
from support.cuda_jit_harness import Target

from tenferro_host.benchmarks import gemm_f16 as gemm

RNG = np.random.default_rng(29)


def test_the_f16_gemm_on_tensor_cores(target: Target) -> None:
    m, n, k = 256, 128, 96
    small = RNG.integers(-3, 4, (m, k)).astype(np.float16), RNG.integers(-3, 4, (k, n))
    wide = RNG.standard_normal((m, k)).astype(np.float16), RNG.standard_normal((k, n))
    for a, b in (small, wide):
        b = b.astype(np.float16)
        with target.jit() as js:
            c = js.alloc_output("float32", (m, n))
            js.launch(
                gemm.gemm_f16,
                gemm.gemm_f16_count(m, n),
                gemm.UNITS,
                c,
                target.rt.upload(a),
                target.rt.upload(b),
            )
            got = c.download()
        want = a.astype(np.float64) @ b.astype(np.float64)
        if a is small[0]:  # integers below 2^24: every order of summation is exact
            np.testing.assert_array_equal(got, want)
        else:  # the order tensor cores add in is theirs: a k-term f32 sum's rounding
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=k * 2**-22 * 8)

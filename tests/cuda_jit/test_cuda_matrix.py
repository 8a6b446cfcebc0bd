"""The f16 tensor-core GEMMs through the CUDA JIT session (PTX ``wmma``, and ``mma.sync`` with
``ldmatrix`` for m16n8k16; the fake raw seam on CPU, and a GPU): numpy's product, exactly where
every partial sum is exact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.cuda_jit_harness import Target

from tenferro_host.benchmarks import attention, gemm_mma
from tenferro_host.benchmarks import gemm_f16 as gemm

RNG = np.random.default_rng(29)


def _wmma(js: Any, c: Any, a: Any, b: Any) -> None:
    m, n = c.shape
    js.launch(gemm.gemm_f16, gemm.gemm_f16_count(m, n), gemm.UNITS, c, a, b)


def _mma(config: int) -> Callable[[Any, Any, Any, Any], None]:
    return lambda js, c, a, b: gemm_mma.MMA_GEMM.launch(js, c, a, b, gemm_mma.MMA_CONFIGS[config])


LAUNCHES = {"wmma": _wmma, **{f"mma{n}": _mma(n) for n in range(len(gemm_mma.MMA_CONFIGS))}}


@pytest.mark.parametrize("kernel", LAUNCHES)
def test_the_f16_gemms_on_tensor_cores(target: Target, kernel: str) -> None:
    m, n, k = 512, 256, 96
    small = RNG.integers(-3, 4, (m, k)).astype(np.float16), RNG.integers(-3, 4, (k, n))
    wide = RNG.standard_normal((m, k)).astype(np.float16), RNG.standard_normal((k, n))
    for a, b in (small, wide):
        b = b.astype(np.float16)
        with target.jit() as js:
            c = js.alloc_output("float32", (m, n))
            LAUNCHES[kernel](js, c, target.rt.upload(a), target.rt.upload(b))
            got = c.download()
        want = a.astype(np.float64) @ b.astype(np.float64)
        if a is small[0]:  # integers below 2^24: every order of summation is exact
            np.testing.assert_array_equal(got, want)
        else:  # the order tensor cores add in is theirs: a k-term f32 sum's rounding
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=k * 2**-22 * 8)


def test_the_fused_attention(target: Target) -> None:
    """softmax(scale q k^T) v of two heads over four key blocks, against numpy."""
    heads, seq, d = 2, 4 * attention.BKV, attention.D
    q, k, v = (RNG.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3))
    scale = np.float32(1 / np.sqrt(d))
    with target.jit() as js:
        o = js.alloc_output("float32", (heads * seq * d,))
        js.launch(
            attention.attention,
            attention.attention_count(seq, heads),
            attention.UNITS,
            o,
            *(target.rt.upload(x.reshape(-1)) for x in (q, k, v)),
            np.uint32(seq),
            scale,
        )
        got = o.download().reshape(heads, seq, d)
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * float(scale)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=0)  # p rounded to f16

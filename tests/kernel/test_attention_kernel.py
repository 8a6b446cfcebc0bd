"""The DSL's fused attention (``benchmarks/attention.py``) on the interpreter: numpy's
softmax(scale q k^T) v within the rounding of p to f16, for several heads and key blocks."""

from __future__ import annotations

import numpy as np
import pytest
from support.webgpu_harness import View, on_interpreter

from tenferro_host.benchmarks import attention as at

RNG = np.random.default_rng(41)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """softmax(scale q k^T) v per head, in float64."""
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hqk,hkd->hqd", p, v.astype(np.float64))


@pytest.mark.parametrize("heads,seq,spread", [(1, 64, 1.0), (2, 128, 1.0), (1, 192, 4.0)])
def test_attention_equals_numpy(heads: int, seq: int, spread: float) -> None:
    """``spread`` widens the scores, so the running maximum moves between key blocks and the
    rescaling of ``o`` is exercised."""
    q, k, v = (
        (RNG.standard_normal((heads, seq, at.D)) * spread).astype(np.float16) for _ in range(3)
    )
    scale = np.float32(1 / np.sqrt(at.D))
    o, *_ = on_interpreter(
        at.attention,
        at.attention_count(seq, heads),
        at.UNITS,
        View.compact(np.zeros(heads * seq * at.D, np.float32)),
        *(View.compact(x.reshape(-1)) for x in (q, k, v)),
        np.uint32(seq),
        scale,
    )
    want = reference(q, k, v, float(scale))
    # p is rounded to f16 before p v: a relative 2^-11 on each weight
    np.testing.assert_allclose(o.reshape(heads, seq, at.D), want, atol=2e-3 * spread, rtol=0)

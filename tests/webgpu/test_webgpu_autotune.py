"""``@K.autotune`` on WebGPU (llvmpipe in CI): the default clock times every config of the
f32 GEMM on the runtime's queue, the winner is kept for later processes and the product
equals numpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from support import cache_support

from tenferro_host.benchmarks import gemm
from tenferro_host.provider import _tuning_tables as tables

cache_dir = cache_support.cache_dir


def test_the_gemm_tunes_on_webgpu_and_keeps_its_winner(rt: Any, cache_dir: Path) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((96, 40)).astype(np.float32)
    b = rng.standard_normal((40, 72)).astype(np.float32)
    tuned = gemm.TILED_GEMM.autotuned(warmup=1, repeats=3)
    with rt.session() as s, s.exec_session().jit("test.gemm") as js:
        c = js.alloc_output("float32", (96, 72))
        gemm.TILED_GEMM.launch_tuned(js, c, rt.upload(a), rt.upload(b), tuned)
    np.testing.assert_allclose(c.download(), a @ b, rtol=1e-4, atol=1e-4)
    (choice,) = tuned.choices().values()
    assert choice.source == "tuned" and len(choice.timings) == len(gemm.GEMM_CONFIGS)
    assert all(t is None or t > 0 for t in choice.timings)
    assert choice.timings[choice.index] == min(t for t in choice.timings if t is not None)
    (learned,) = tables.learned_tables(cache_dir)
    assert learned["device"]["target"] == "webgpu" and "name" in learned["device"]
    assert learned["config"] == choice.config.plain()
    again = gemm.TILED_GEMM.autotuned()  # a fresh memo: what a later process sees
    with rt.session() as s, s.exec_session().jit("test.gemm") as js:
        gemm.TILED_GEMM.launch_tuned(js, c, rt.upload(a), rt.upload(b), again)
    assert [c.source for c in again.choices().values()] == ["learned"]
    np.testing.assert_allclose(c.download(), a @ b, rtol=1e-4, atol=1e-4)

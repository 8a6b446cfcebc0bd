"""The autotuned f32 GEMM on CUDA: every config that compiles for the device is timed on the
runtime's stream, the winner equals numpy and is read back from the kernel cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import cache_support
from support.cuda_support import cuda_runtime

from tenferro_host.benchmarks import gemm
from tenferro_host.provider import _tuning_tables as tables

cache_dir = cache_support.cache_dir


@pytest.mark.gpu
@pytest.mark.cuda
def test_the_autotuned_gemm_tunes_and_matches_numpy_on_cuda(cache_dir: Path) -> None:
    rt = cuda_runtime()
    rng = np.random.default_rng(26)
    a = rng.standard_normal((1000, 520)).astype(np.float32)
    b = rng.standard_normal((520, 770)).astype(np.float32)
    tuned = gemm.TILED_GEMM.autotuned()
    with rt.session() as s, s.exec_session().jit("test.gemm") as js:
        c = js.alloc_output("float32", (1000, 770))
        gemm.TILED_GEMM.launch_tuned(js, c, rt.upload(a), rt.upload(b), tuned)
    np.testing.assert_allclose(
        c.download(), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3 * np.sqrt(520)
    )
    (choice,) = tuned.choices().values()
    assert choice.source == "tuned" and choice.skipped == ()  # every config runs on a GPU
    (learned,) = tables.learned_tables(cache_dir)
    assert learned["device"]["target"] == "cuda" and learned["device"]["arch"].startswith("sm_")
    assert {"sms", "driver"} <= set(learned["device"])
    again = gemm.TILED_GEMM.autotuned(frozen=True)  # a later process, frozen: reads the winner
    with rt.session() as s, s.exec_session().jit("test.gemm") as js:
        gemm.TILED_GEMM.launch_tuned(js, c, rt.upload(a), rt.upload(b), again)
    assert [(x.source, x.index) for x in again.choices().values()] == [("learned", choice.index)]

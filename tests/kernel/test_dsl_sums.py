"""The sums of bench/dsl_vs_cupy.py (tenferro_host.benchmarks.dsl_sums) are correct: they equal
numpy on the interpreter and compile for sm_90 (its matmul rows' GEMM is
tests/kernel/test_autotuned_gemm.py's)."""

from __future__ import annotations

import numpy as np
import pytest
from support.nvrtc_compile import compile_sm90
from support.webgpu_harness import View, on_interpreter
from tenferro_host_cuda_jit._codegen import generate

from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.benchmarks import dsl_sums as bench

RNG = np.random.default_rng(28)


@pytest.mark.parametrize(
    ("kern", "subgroup_size"),
    [
        (bench.dsl_sum, 32),
        (bench.dsl_sum4, 32),
        (bench.dsl_sum_subgroup, 32),
        (bench.dsl_sum_subgroup, 4),
    ],
    ids=["scalar", "load4", "subgroup", "subgroup-of-4"],
)
@pytest.mark.parametrize("n", [100_003, 4096, 3])
def test_bench_sum_equals_numpy(kern: K.Kernel, subgroup_size: int, n: int) -> None:
    x = RNG.standard_normal(n).astype(np.float32)
    (out, _) = on_interpreter(
        kern,
        7,
        bench.SUM_CUBE,
        View.compact(np.zeros(1, np.float32)),
        View.compact(x),
        subgroup_size=subgroup_size,
    )
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.parametrize(
    "kern",
    [bench.dsl_sum, bench.dsl_sum4, bench.dsl_sum_subgroup],
    ids=["sum", "sum4", "sum-subgroup"],
)
def test_bench_kernels_compile_for_sm90(kern: K.Kernel) -> None:
    descs = [K.ArrayDesc(dtypes.float32, 1)] * len(kern.runtime_params)
    spec = kern.specialize(descs, {}, target="cuda", features=("sm_90",))
    assert compile_sm90(generate(spec).source) > 0

"""The kernels of bench/dsl_v2_bench.py are correct: the sum and the register-blocked matmul
equal numpy on the interpreter (edges of partial tiles included) and compile for sm_90."""

from __future__ import annotations

import dsl_v2_bench as bench
import numpy as np
import pytest
from support.nvrtc_compile import compile_sm90
from support.webgpu_harness import View, on_interpreter
from tenferro_host_cuda_jit._codegen import generate

from tenferro_host import dtypes
from tenferro_host import kernel as K

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


@pytest.mark.parametrize("n,k,m", [(64, 16, 64), (70, 37, 45)])
def test_bench_matmul_equals_numpy(n: int, k: int, m: int) -> None:
    a = RNG.standard_normal((n, k)).astype(np.float32)
    b = RNG.standard_normal((k, m)).astype(np.float32)
    count = (-(-m // bench.TILE), -(-n // bench.TILE))
    (c, _, _) = on_interpreter(
        bench.dsl_matmul,
        count,
        (bench.UNITS, bench.UNITS),
        View.compact(np.zeros((n, m), np.float32)),
        View.compact(a),
        View.compact(b),
    )
    np.testing.assert_allclose(c.reshape(m, n).T, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "kern",
    [bench.dsl_sum, bench.dsl_sum4, bench.dsl_sum_subgroup, bench.dsl_matmul],
    ids=["sum", "sum4", "sum-subgroup", "matmul"],
)
def test_bench_kernels_compile_for_sm90(kern: K.Kernel) -> None:
    ndim = 2 if kern is bench.dsl_matmul else 1
    descs = [K.ArrayDesc(dtypes.float32, ndim)] * len(kern.runtime_params)
    spec = kern.specialize(descs, {}, target="cuda", features=("sm_90",))
    assert compile_sm90(generate(spec).source) > 0

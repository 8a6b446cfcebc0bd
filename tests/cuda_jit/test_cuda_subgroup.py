"""Subgroup operations on CUDA: every subgroup kernel compiles for sm_90 with NVRTC (no GPU
needed); on a GPU, the guide's proof kernels against numpy and every construct against the
interpreter (warps of 32, a partial last warp included)."""

from __future__ import annotations

import numpy as np
import pytest
from support import subgroup_kernels as sk
from support.cuda_jit_harness import Target, assert_same, on_target
from support.nvrtc_compile import compile_sm90
from support.webgpu_harness import View
from tenferro_host_cuda_jit._codegen import generate

from tenferro_host import dtypes
from tenferro_host import kernel as K

RNG = np.random.default_rng(26)
F32, I32, U32 = (
    K.ArrayDesc(dtypes.float32, 1),
    K.ArrayDesc(dtypes.int32, 1),
    K.ArrayDesc(dtypes.uint32, 1),
)
SPECS = {
    "subgroup_sum": (sk.subgroup_sum, [F32, F32]),
    "row_softmax": (sk.row_softmax, [K.ArrayDesc(dtypes.float32, 2)] * 2),
    "subgroup_constructs_i32": (sk.subgroup_constructs, [U32, I32, I32, U32, I32]),
    "subgroup_constructs_u32": (sk.subgroup_constructs, [U32, U32, U32, U32, U32]),
    "float_reductions": (sk.float_reductions, [F32, F32]),
    "reductions_in_cube_uniform_branches": (sk.reductions_in_cube_uniform_branches, [F32, F32]),
}
gpu = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_subgroup_kernels_compile_for_sm90(name: str) -> None:
    kernel, descs = SPECS[name]
    source = generate(kernel.specialize(descs, {}, "cuda")).source
    assert "__shfl_" in source or "__ballot_sync" in source
    assert compile_sm90(source) > 0


@pytest.mark.gpu
@pytest.mark.cuda
def test_cuda_warp_shuffle_sum_matches_numpy() -> None:
    target = Target("cuda")
    x = RNG.integers(-50, 50, 1 << 24).astype(np.float32)  # exact sums in any order
    (got, _) = on_target(
        target, sk.subgroup_sum, 264, 256, View.compact(np.zeros(1, np.float32)), View.compact(x)
    )
    assert got[0] == x.sum(dtype=np.float64)


@pytest.mark.gpu
@pytest.mark.cuda
def test_cuda_fused_row_softmax_matches_numpy() -> None:
    target = Target("cuda")
    x = RNG.standard_normal((64, 4096)).astype(np.float32) * 4
    out = View.compact(np.zeros_like(x))
    (got, _) = on_target(target, sk.row_softmax, 64, 256, out, View.compact(x))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        got.reshape(x.shape, order="F"), e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-9
    )


@pytest.mark.gpu
@pytest.mark.cuda
def test_cuda_subgroup_constructs_match_the_interpreter() -> None:
    target = Target("cuda")
    n = 3 * 48  # cubes of 48 units: a whole warp and a partial one each
    x = View.compact(RNG.integers(-9, 9, n).astype(np.int32))
    outs = [
        View.compact(np.zeros(k * n, t))
        for k, t in ((2, np.uint32), (3, np.int32), (2, np.int32), (1, np.uint32))
    ]
    assert_same(target, sk.subgroup_constructs, 3, 48, *outs, x)
    f = View.compact(RNG.standard_normal(n).astype(np.float32))
    assert_same(target, sk.float_reductions, 3, 48, View.compact(np.zeros(3 * n, np.float32)), f)

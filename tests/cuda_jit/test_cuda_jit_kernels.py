"""Every test kernel (tests/support/kernels.py, construct_kernels.py) through the CUDA JIT session
equals the CPU interpreter: hypothesis sizes (empty, odd, beyond one cube), views, the fold.

Each test runs on the fake raw seam (CPU) and, marked ``gpu``/``cuda``, on a CUDA device.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import construct_kernels as ck
from support import kernels
from support import launch_checks as lc
from support import webgpu_harness as harness
from support.cuda_jit_harness import Target, View, assert_same
from tenferro_host_cuda_jit._jit import CudaJitSession

SETTINGS = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
sizes = st.one_of(st.sampled_from([0, 1, 2, 31, 255, 256, 257, 1000]), st.integers(0, 3000))
small_sizes = st.sampled_from([0, 1, 33, 300])
dims = st.sampled_from([1, 3, 32, 64, 256])
FLOATS = ["float32", "float64", "float16"]
GRID_SLOTS = 12  # the launch indices ck.grid_indices writes per thread


def rand(rng: np.random.Generator, n: int, dtype: str, low: float = -4, high: float = 4) -> Any:
    """The shared generator with a narrower default range (float16 operands stay exact-ish)."""
    return harness.rand(rng, n, dtype, low, high)


def compact(*arrays: Any) -> list[View]:
    return [View.compact(np.asarray(a)) for a in arrays]


def blocks(n: int, dim: int) -> int:
    return -(-n // dim)


# ---------------------------------------------------------------- kernels.py


@SETTINGS
@given(n=sizes, dim=dims, dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_saxpy_and_add(target: Target, n: int, dim: int, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    out, x, y = compact(*(rand(rng, n, dtype) for _ in range(3)))
    a = np.dtype(dtype).type(1.5)
    # fma may fuse on the GPU: compare with a tolerance (docs/contract.md)
    tol = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-14}[dtype]
    assert_same(target, kernels.saxpy, blocks(n, dim), dim, out, x, y, a, rtol=tol, atol=tol)
    assert_same(target, kernels.add, blocks(n, dim), dim, out, x, y)


@SETTINGS
@given(**lc.STRIDED_DRAWS)
def test_transpose_and_row_sums_of_strided_views(
    target: Target, rows: int, cols: int, seed: int
) -> None:
    lc.check_strided_views(partial(assert_same, target), np.random.default_rng(seed), rows, cols)


@SETTINGS
@given(**lc.STEP_DRAWS)
def test_offset_and_step_views_are_read_with_their_layout(
    target: Target, n: int, offset: int, step: int, seed: int
) -> None:
    storage = rand(np.random.default_rng(seed), offset + n * step + 3, "float64")
    lc.check_step_view(partial(assert_same, target), storage, offset, n, step)


def test_aliased_views_of_one_storage(target: Target) -> None:
    lc.check_aliased_views(partial(assert_same, target))


# ---------------------------------------------------------------- construct_kernels.py


@SETTINGS
@given(n=small_sizes, dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_float_arithmetic(target: Target, n: int, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rand(rng, n, dtype)
    b = (rand(rng, n, dtype, 0.5, 3) * np.where(rng.random(n) < 0.5, -1, 1)).astype(dtype)
    out = View.compact(np.zeros(7 * n, dtype))
    assert_same(target, ck.arith_float, blocks(n, 32), 32, out, *compact(a, b))


@SETTINGS
@given(
    n=small_sizes, dtype=st.sampled_from(["int32", "int64", "uint32"]), seed=st.integers(0, 2**16)
)
def test_int_arithmetic_wraps_and_truncates(target: Target, n: int, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(max(info.min, -1000), 1000, n).astype(dtype)
    b = rng.integers(1, 50, n).astype(dtype)
    if info.min < 0:
        b = (b * np.where(rng.random(n) < 0.5, -1, 1)).astype(dtype)
    if n:
        a[0] = info.max  # wraps
    out = View.compact(np.zeros(6 * n, dtype))
    assert_same(target, ck.arith_int, blocks(n, 64), 64, out, *compact(a, b))


def test_u32_wrap_and_int_math(target: Target) -> None:
    assert_same(target, ck.u32_wrap, 1, 64, View.compact(np.zeros(50, np.uint32)))
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-50, 50, 300).astype(np.int32) for _ in range(2))
    out = View.compact(np.zeros(900, np.int32))
    assert_same(target, ck.int_math, blocks(300, 128), 128, out, *compact(a, b))


@SETTINGS
@given(n=small_sizes, dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_power_and_math_functions(target: Target, n: int, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rand(rng, n, dtype), rand(rng, n, dtype, -2, 2)
    out = View.compact(np.zeros(14 * n, dtype))
    tol = {"float16": 4e-3, "float32": 2e-5, "float64": 1e-12}[dtype]
    assert_same(
        target, ck.power_and_math, blocks(n, 64), 64, out, *compact(a, b), rtol=tol, atol=tol
    )


@SETTINGS
@given(n=small_sizes, seed=st.integers(0, 2**16))
def test_casts(target: Target, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    src = rand(rng, n, "float32", -1000, 1000)
    src[: n // 4] = np.trunc(src[: n // 4])
    outs = compact(
        *(np.zeros(n, t) for t in ("float32", "int32", "uint32", "float16", "float64", "bool"))
    )
    assert_same(target, ck.casts, blocks(n, 64), 64, *outs, View.compact(src))


def test_generic_zero_literals_and_i64_scalar(target: Target) -> None:
    out = View.compact(np.zeros(70, np.float32))
    assert_same(target, ck.generic_zero_and_literals, 3, 32, out, np.int64(10))


def test_branches_and_loops(target: Target) -> None:
    a = np.arange(-20, 20, dtype=np.int32)
    assert_same(target, ck.branches, 3, 16, View.compact(np.zeros_like(a)), View.compact(a))
    n = np.arange(0, 12, dtype=np.int32)
    assert_same(target, ck.loops, 3, 4, View.compact(np.zeros_like(n)), View.compact(n))
    for step in (1, 3, 4):
        out = View.compact(np.zeros(37, np.uint32))
        assert_same(target, ck.loop_counter_after_loop, 2, 32, out, step)


@SETTINGS
@given(n=small_sizes, seed=st.integers(0, 2**16))
def test_select_bool_arrays_and_short_circuit(target: Target, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for dtype in ("float16", "float64"):
        out, flags, a = compact(np.zeros(n, dtype), rand(rng, n, "bool"), rand(rng, n, dtype))
        assert_same(target, ck.select_and_bools, blocks(n, 32), 32, out, flags, a)
    out, a = compact(np.zeros(n, np.float32), rand(rng, n, "float32"))
    assert_same(target, ck.short_circuit, blocks(n, 32) + 1, 32, out, a)  # a spare cube


def test_unguarded_copy_and_division(target: Target) -> None:
    x = np.arange(96, dtype=np.float32)
    assert_same(
        target, ck.unguarded, 3, 32, View.compact(np.zeros(96, np.float32)), View.compact(x)
    )
    a = np.arange(-50, 50, dtype=np.int32)
    b = np.where(np.arange(100) % 7 == 0, -3, np.arange(100) % 9 + 1).astype(np.int32)
    assert_same(target, ck.divide, 4, 32, View.compact(np.zeros(100, np.int32)), *compact(a, b))


@pytest.mark.parametrize("flag", [True, False])
def test_scalar_kinds_and_constants(target: Target, flag: bool) -> None:
    out, wide = compact(np.zeros(40, np.float16), np.arange(40, dtype=np.int64))
    assert_same(
        target,
        ck.scalar_kinds,
        2,
        32,
        out,
        wide,
        flag,
        np.float16(1.5),
        5,
        np.uint32(3),
        scale=0.25,
    )


@SETTINGS
@given(count=lc.GRID_COUNTS, dim=lc.GRID_DIMS)
def test_grid_indices_3d(
    target: Target, count: tuple[int, int, int], dim: tuple[int, int, int]
) -> None:
    lc.check_launch_indices(partial(assert_same, target), ck.grid_indices, GRID_SLOTS, count, dim)


# ---------------------------------------------------------------- the fold


@SETTINGS
@given(limit=lc.FOLD_LIMITS, count=lc.FOLD_COUNTS)
def test_counts_beyond_the_grid_limit_fold(
    target: Target, monkeypatch: pytest.MonkeyPatch, limit: int, count: tuple[int, int, int]
) -> None:
    """The test hook lowers the grid limit: CUBE_POS/ABSOLUTE_POS stay those of the count."""
    if not lc.fits_folded(count, limit):
        return  # does not fit even folded: test_cuda_jit_session tests that error
    monkeypatch.setattr(CudaJitSession, "max_grid_override", (limit, limit, limit))
    lc.check_fold(partial(assert_same, target), ck.grid_indices, GRID_SLOTS, count)


def test_a_one_dimensional_count_folds_into_three_dimensions(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CudaJitSession, "max_grid_override", (4, 4, 4))
    n = 61 * 32  # 61 cubes > 4 * 4: the grid is (4, 4, 4) with 3 surplus cubes
    x, y, o = compact(
        np.arange(n, dtype=np.float32), np.full(n, 2, np.float32), np.zeros(n, np.float32)
    )
    assert_same(target, kernels.saxpy, 61, 32, o, x, y, 3.0)

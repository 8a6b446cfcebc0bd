"""DSL kernels on WebGPU equal the CPU interpreter: shapes (empty, odd), views, the fold."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import kernels
from support import launch_checks as lc
from support import wgpu_kernels as wk
from support.webgpu_harness import View, assert_same, rand

SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
sizes = st.one_of(st.sampled_from([0, 1, 2, 3, 7, 255, 256, 257, 1023]), st.integers(0, 3000))
dims = st.sampled_from([1, 3, 32, 64, 256])


def blocks(n: int, dim: int) -> int:
    return -(-n // dim)


@SETTINGS
@given(n=sizes, dim=dims, seed=st.integers(0, 2**16))
def test_saxpy_and_add(rt: Any, n: int, dim: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    out, x, y = (View.compact(rand(rng, n, "float32")) for _ in range(3))
    assert_same(
        rt, kernels.saxpy, blocks(n, dim), dim, out, x, y, np.float32(1.5), rtol=1e-6, atol=1e-5
    )  # a*x+y may fuse (docs/contract.md): the error is absolute, near cancellation
    assert_same(rt, kernels.add, blocks(n, dim), dim, out, x, y)


@SETTINGS
@given(**lc.STRIDED_DRAWS)
def test_strided_views_bind_with_their_strides(rt: Any, rows: int, cols: int, seed: int) -> None:
    lc.check_strided_views(partial(assert_same, rt), np.random.default_rng(seed), rows, cols)


@SETTINGS
@given(**lc.STEP_DRAWS)
def test_offset_and_step_views(rt: Any, n: int, offset: int, step: int, seed: int) -> None:
    storage = rand(np.random.default_rng(seed), offset + n * step + 3, "float32")
    lc.check_step_view(partial(assert_same, rt), storage, offset, n, step)


@SETTINGS
@given(n=sizes, dtype=st.sampled_from(["int32", "uint32"]), seed=st.integers(0, 2**16))
def test_integer_ops(rt: Any, n: int, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b[b == 0] = 3
    if dtype == "int32":  # INT_MIN // -1 is undefined in C; avoid it
        b[(a == info.min) & (b == -1)] = 5
    out = View.compact(np.zeros(8 * n, dtype))
    assert_same(rt, wk.int_ops, blocks(n, 64), 64, out, View.compact(a), View.compact(b))


@SETTINGS
@given(n=sizes, seed=st.integers(0, 2**16))
def test_float_ops(rt: Any, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rand(rng, n, "float32", -20, 20)
    b = rand(rng, n, "float32", -6, 6)
    b[np.abs(b) < 0.25] = 0.75
    out = View.compact(np.zeros(12 * n, np.float32))
    assert_same(
        rt,
        wk.float_ops,
        blocks(n, 32),
        32,
        out,
        View.compact(a),
        View.compact(b),
        rtol=2e-5,
        atol=2e-5,
    )


def test_nan_operands_match_the_interpreter(rt: Any) -> None:
    """Float min/max return the non-NaN operand (C fmin/fmax) on every target."""
    a = np.array([np.nan, 1.0, np.nan, -2.0], np.float32)
    b = np.array([3.0, np.nan, np.nan, 5.0], np.float32)
    out = View.compact(np.zeros(8, np.float32))
    assert_same(rt, wk.min_max, 1, 4, out, View.compact(a), View.compact(b))


@SETTINGS
@given(n=sizes, seed=st.integers(0, 2**16))
def test_casts_and_bool_storage(rt: Any, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rand(rng, n, "float32", -1000, 1000)
    x[: n // 4] = np.trunc(x[: n // 4])  # exact integers and zeros too
    x[n // 4 : n // 3] = 0
    args = [View.compact(np.zeros(n, t)) for t in ("int32", "uint32", "float32")]
    flags = View.compact(rand(rng, n, "bool"))
    assert_same(rt, wk.casts, blocks(n, 64), 64, *args, flags, View.compact(x))


@SETTINGS
@given(n=sizes, t=st.floats(-2, 2, width=32), seed=st.integers(0, 2**16))
def test_bool_arrays_and_select(rt: Any, n: int, t: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = View.compact(rand(rng, n, "float32", -3, 3))
    mask = View.compact(np.zeros(n, bool))
    assert_same(rt, wk.threshold, blocks(n, 64), 64, mask, x, t)
    a, b = (View.compact(rand(rng, n, "float32")) for _ in range(2))
    picked = View.compact(np.zeros(n, np.float32))
    flags = View.compact(rand(rng, n, "bool"))
    assert_same(rt, wk.masked_pick, blocks(n, 64), 64, picked, flags, a, b)


@SETTINGS
@given(
    n=st.integers(0, 300),
    count=st.integers(0, 20),
    step=st.sampled_from([-3, -1, 1, 2]),
    flag=st.booleans(),
)
def test_control_flow(rt: Any, n: int, count: int, step: int, flag: bool) -> None:
    out = View.compact(np.zeros(n, np.int32))
    assert_same(rt, wk.control, blocks(n, 32), 32, out, count, np.int32(step), flag)


def test_compile_time_constant(rt: Any) -> None:
    x = View.compact(np.arange(10, dtype=np.float32))
    out = View.compact(np.zeros(10, np.float32))
    assert_same(rt, wk.scale_const, 1, 16, out, x, factor=2.5)
    assert_same(rt, wk.scale_const, 1, 16, out, x, factor=-0.5)


@SETTINGS
@given(count=lc.GRID_COUNTS, dim=lc.GRID_DIMS)
def test_launch_indices_3d(rt: Any, count: tuple[int, int, int], dim: tuple[int, int, int]) -> None:
    lc.check_launch_indices(partial(assert_same, rt), wk.indices, wk.INDEX_SLOTS, count, dim)


@SETTINGS
@given(limit=lc.FOLD_LIMITS, count=lc.FOLD_COUNTS)
def test_fold_beyond_the_workgroup_limit(
    fresh_rt: Any, limit: int, count: tuple[int, int, int]
) -> None:
    fresh_rt.max_workgroups_per_dimension = limit
    if not lc.fits_folded(count, limit):
        return  # does not fit even folded: tested in test_sessions
    lc.check_fold(partial(assert_same, fresh_rt), wk.indices, wk.INDEX_SLOTS, count)


def test_aliased_views_share_one_binding(rt: Any) -> None:
    lc.check_aliased_views(partial(assert_same, rt))


def test_float16_when_the_adapter_offers_it(rt: Any) -> None:
    if not rt.device_info.shader_f16:
        pytest.skip("the adapter does not offer shader-f16")
    rng = np.random.default_rng(1)
    out, x, y = (View.compact(rng.uniform(-4, 4, 301).astype(np.float16)) for _ in range(3))
    assert_same(rt, kernels.saxpy, 5, 64, out, x, y, np.float16(0.5), rtol=2e-3, atol=2e-3)


def test_f16_inside_expressions_only(rt: Any) -> None:
    if not rt.device_info.shader_f16:
        pytest.skip("the adapter does not offer shader-f16")
    x = View.compact(np.linspace(-100, 100, 77).astype(np.float32))
    out = View.compact(np.zeros(77, np.float32))
    assert_same(rt, wk.inline_f16, 2, 64, out, x)

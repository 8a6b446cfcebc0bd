"""Every language construct on the CPU interpreter, compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from support import kernels
from support.construct_kernels import (
    arith_float,
    arith_int,
    branches,
    casts,
    divide,
    generic_zero_and_literals,
    grid_indices,
    int_math,
    loop_counter_after_loop,
    loops,
    power_and_math,
    scalar_kinds,
    select_and_bools,
    short_circuit,
    u32_wrap,
    unguarded,
)
from support.dsl_harness import launch

from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import ArrayArg, run
from tenferro_host.errors import UnsupportedError, ValidationError

N = 100
rng = np.random.default_rng(0)


def rand(dtype, n=N, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, n).astype(dtype)


# ------------------------------------------------------------ examples


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_saxpy(dtype):
    x, y, out = rand(dtype), rand(dtype), np.zeros(N, dtype)
    launch(kernels.saxpy, N, out, x, y, 2.5)
    expected = (dtype(2.5) * x + y).astype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_add():
    lhs, rhs, out = rand(np.float64), rand(np.float64), np.zeros(N)
    launch(kernels.add, N, out, lhs, rhs)
    np.testing.assert_array_equal(out, lhs + rhs)


def test_transpose_of_a_strided_view_into_compact_output():
    m = rng.standard_normal((5, 7))
    storage = m.ravel(order="F")  # column-major 5x7
    view = ArrayArg(storage, 0, (7, 5), (5, 1))  # its transpose, non-compact
    out = np.zeros(35)
    spec = kernels.transpose_2d.specialize(
        [K.ArrayDesc(_dt(out), 1), K.ArrayDesc(_dt(storage), 2, compact=False)]
    )
    run(spec, (2, 1, 1), (32, 1, 1), [ArrayArg(out, 0, (35,), (1,)), view])
    np.testing.assert_array_equal(out, m.T.ravel(order="F"))


def test_row_sums_column_major_with_offset():
    m = rng.standard_normal((6, 4))
    storage = np.concatenate([np.full(3, 99.0), m.ravel(order="F")])
    out = np.zeros(6)
    spec = kernels.row_sums.specialize([K.ArrayDesc(_dt(out), 1), K.ArrayDesc(_dt(m), 2)])
    run(
        spec,
        (1, 1, 1),
        (8, 1, 1),
        [ArrayArg(out, 0, (6,), (1,)), ArrayArg(storage, 3, (6, 4), (1, 6))],
    )
    np.testing.assert_allclose(out, m.sum(axis=1), rtol=1e-12)


def _dt(a):
    from tenferro_host import dtypes

    return dtypes.dtype(a.dtype)


# ------------------------------------------------------------ arithmetic


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_float_arithmetic(dtype):
    a, b = rand(dtype), rand(dtype, lo=0.5, hi=3.0) * np.where(rng.random(N) < 0.5, -1, 1)
    b = b.astype(dtype)
    out = np.zeros(7 * N, dtype)
    launch(arith_float, N, out, a, b)
    with np.errstate(all="ignore"):
        expected = [a + b, a - b, a * b, a / b, np.trunc(a / b), np.fmod(a, b), -a + dtype(0.5)]
    for j, e in enumerate(expected):
        np.testing.assert_array_equal(out[j::7], e.astype(dtype), err_msg=f"op {j}")


def c_div(a, b):
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return np.where((a < 0) != (b < 0), -q, q)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_int_arithmetic_truncates_and_wraps(dtype):
    info = np.iinfo(dtype)
    a = rng.integers(max(info.min, -1000), 1000, N).astype(dtype)
    b = rng.integers(1, 50, N).astype(dtype)
    if info.min < 0:
        b = (b * np.where(rng.random(N) < 0.5, -1, 1)).astype(dtype)
    a[0] = info.max  # wraps
    out = np.zeros(6 * N, dtype)
    launch(arith_int, N, out, a, b)
    with np.errstate(all="ignore"):
        q = c_div(a, b).astype(dtype)
        expected = [a + b, a - b, a * b, q, (a - q * b).astype(dtype), a * dtype(3) - dtype(1)]
    for j, e in enumerate(expected):
        np.testing.assert_array_equal(out[j::6], e.astype(dtype), err_msg=f"op {j}")


def test_u32_indices_wrap_around():
    out = np.zeros(8, np.uint32)
    launch(u32_wrap, 8, out)
    np.testing.assert_array_equal(out, (np.arange(8, dtype=np.uint32) - np.uint32(5)))
    assert out[0] == 2**32 - 5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_functions(dtype):
    a, b = rand(dtype), rand(dtype, lo=-2, hi=2)
    out = np.zeros(14 * N, dtype)
    launch(power_and_math, N, out, a, b)
    x = np.abs(a) + dtype(0.25)
    expected = [
        x**b,
        x**2,
        np.sqrt(x),
        np.exp(a),
        np.log(x),
        np.sin(a),
        np.cos(a),
        np.tanh(a),
        np.abs(a),
        np.floor(a),
        np.ceil(a),
        np.fmin(a, b),
        np.fmax(a, b),
        a * b + x,
    ]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for j, e in enumerate(expected):
        np.testing.assert_allclose(
            out[j::14], e.astype(dtype), rtol=rtol, atol=rtol, err_msg=f"op {j}"
        )
    assert out.dtype == dtype


def test_int_math():
    a, b = rng.integers(-50, 50, N).astype(np.int32), rng.integers(-50, 50, N).astype(np.int32)
    out = np.zeros(3 * N, np.int32)
    launch(int_math, N, out, a, b)
    np.testing.assert_array_equal(out[0::3], np.abs(a))
    np.testing.assert_array_equal(out[1::3], np.minimum(a, b))
    np.testing.assert_array_equal(out[2::3], np.maximum(a, b))


def test_casts_truncate_and_convert():
    src = rand(np.float32)
    outs = [
        np.zeros(N, np.float32),
        np.zeros(N, np.int32),
        np.zeros(N, np.uint32),
        np.zeros(N, np.float16),
        np.zeros(N, np.float64),
        np.zeros(N, bool),
    ]
    launch(casts, N, *outs, src)
    f, i, u, h, d, bo = outs
    np.testing.assert_array_equal(i, np.trunc(src).astype(np.int32))
    np.testing.assert_array_equal(u, np.trunc(np.abs(src)).astype(np.uint32))
    np.testing.assert_array_equal(h, src.astype(np.float16))
    np.testing.assert_array_equal(d, src.astype(np.float64) * 2)
    np.testing.assert_array_equal(bo, np.trunc(src) != 0)
    np.testing.assert_array_equal(f, bo.astype(np.float32) + np.trunc(src))


def test_float_literal_takes_f32_and_generic_int():
    out = np.zeros(4, np.float32)
    launch(generic_zero_and_literals, 4, out, np.int64(10))
    acc = np.float32(0)
    for _ in range(10):
        acc = np.float32(acc + np.float32(0.1))
    np.testing.assert_array_equal(out, np.full(4, acc, np.float32))


# ------------------------------------------------------------ control flow


def test_if_elif_else_and_bool_ops():
    a = np.arange(-20, 20, dtype=np.int32)
    out = np.zeros_like(a)
    launch(branches, a.size, out, a, dim=16)
    expected = np.select([a < -10, (a < 0) | (a == 5), a >= 10], [1, 2, 3], 4)
    expected += np.where((a >= 0) & (a < 3) & (a != 1), 10, 0)
    np.testing.assert_array_equal(out, expected)


def test_for_while_break_continue_per_thread():
    n = np.arange(0, 12, dtype=np.int32)
    out = np.zeros_like(n)
    launch(loops, n.size, out, n, dim=4)
    expected = []
    for v in n:
        total = 0
        for j in range(v):
            if j == 7:
                break
            if j % 2 == 1:
                continue
            total += j
        total += sum(j * 100 for j in range(10, 0, -3))
        total += 1000 * len(range(2, v))
        total += 10000 * sum(1 for k in range(1, v + 1) if k != 2)
        expected.append(total)
    np.testing.assert_array_equal(out, expected)


def test_for_counter_keeps_the_value_that_ended_the_loop():
    out = np.zeros(4, np.uint32)
    launch(loop_counter_after_loop, 4, out, 4)
    np.testing.assert_array_equal(out, [12, 13, 10, 11])


def test_select_and_bool_arrays():
    a = rand(np.float64)
    flags = rng.random(N) < 0.5
    before = flags.copy()
    out = np.zeros(N)
    launch(select_and_bools, N, out, flags, a)
    np.testing.assert_array_equal(out, np.where(before & (a > 0), a, -1.0))
    np.testing.assert_array_equal(flags, ~before)


def test_and_or_short_circuit_guard_reads():
    a = np.array([1.0, -1.0, 2.0])
    out = np.zeros(3)
    launch(short_circuit, 64, out, a)  # 64 threads: the guard must stop reads past 3
    np.testing.assert_array_equal(out, [2.0, 0.0, 2.0])


# ------------------------------------------------------------ grid


def test_grid_indices_3d():
    count, dim = (2, 3, 2), (4, 2, 3)
    n = 12 * 24 * 12
    out = np.zeros(n, np.uint32)
    spec = grid_indices.specialize([K.ArrayDesc(_dt(out), 1)])
    run(spec, count, dim, [ArrayArg(out, 0, (n,), (1,))])
    rows = out.reshape(-1, 12)
    t = 0
    for cz in range(2):
        for cy in range(3):
            for cx in range(2):
                for uz in range(3):
                    for uy in range(2):
                        for ux in range(4):
                            cube = cx + 2 * (cy + 3 * cz)
                            unit = ux + 4 * (uy + 2 * uz)
                            assert rows[t].tolist() == [
                                unit,
                                ux,
                                uy,
                                uz,
                                cube,
                                cx,
                                cy,
                                cz,
                                cx * 4 + ux,
                                cy * 2 + uy,
                                cz * 3 + uz,
                                24 * 1000 + 12 + 200 + 20,
                            ], t
                            t += 1


def test_empty_launch_runs_nothing():
    out = np.zeros(0, np.float32)
    launch(kernels.saxpy, 0, out, out, out, 1.0)
    spec = kernels.saxpy.specialize([K.ArrayDesc(_dt(out), 1)] * 3 + [K.ScalarDesc()])
    run(spec, (0, 1, 1), (32, 1, 1), [ArrayArg(out, 0, (0,), (1,))] * 3 + [1.0])


# ------------------------------------------------------------ runtime errors


def test_out_of_bounds_read_is_a_validation_error():
    x, out = np.zeros(10), np.zeros(40)
    with pytest.raises(ValidationError, match=r"index 10 of array 'x' is out of bounds") as info:
        launch(unguarded, 40, out, x, dim=8)
    assert info.value.argument == "x"
    assert "construct_kernels.py:" in str(info.value)
    assert "ABSOLUTE_POS=10" in str(info.value)


def test_out_of_bounds_write_is_a_validation_error():
    x, out = np.zeros(16), np.zeros(10)
    with pytest.raises(ValidationError, match="'out' is out of bounds"):
        launch(unguarded, 16, out, x, dim=16)
    np.testing.assert_array_equal(out, 0)


def test_int_division_by_zero_is_a_validation_error():
    a, b = np.ones(4, np.int32), np.array([1, 2, 0, 1], np.int32)
    with pytest.raises(ValidationError, match="division or remainder by zero"):
        launch(divide, 4, np.zeros(4, np.int32), a, b)


def test_zero_range_step_is_a_validation_error():
    with pytest.raises(ValidationError, match="range step is zero"):
        launch(loop_counter_after_loop, 4, np.zeros(4, np.uint32), 0)


def test_view_exceeding_storage_is_rejected():
    spec = kernels.add.specialize([K.ArrayDesc(_dt(np.zeros(1)), 1)] * 3)
    ok = ArrayArg(np.zeros(4), 0, (4,), (1,))
    with pytest.raises(ValidationError, match="exceeds its storage"):
        run(spec, (1, 1, 1), (4, 1, 1), [ok, ok, ArrayArg(np.zeros(4), 2, (4,), (1,))])


def test_more_than_u32_elements_is_unsupported():
    spec = kernels.add.specialize([K.ArrayDesc(_dt(np.zeros(1)), 1)] * 3)
    huge = ArrayArg(np.zeros(4), 0, (2**32,), (0,))
    with pytest.raises(UnsupportedError, match="at most 4294967295 elements"):
        run(spec, (1, 1, 1), (4, 1, 1), [huge, huge, huge])


def test_scalar_kinds_i64_runtime_step_and_f16_constants():
    out, wide = np.zeros(8, np.float16), np.zeros(8, np.int64)
    launch(scalar_kinds, 8, out, wide, True, 1.5, 5, 3)
    assert np.all(np.isneginf(out))  # 1.5*0.5 + 3 - f16(1e9) == -inf in f16
    i = np.arange(8)
    np.testing.assert_array_equal(wide, -15 + i // 2 + 1 + 5)  # C: INT64_MIN % 7 == -1
    launch(scalar_kinds, 8, out, wide, False, 1.5, 5, 3)  # flag False: nothing changes
    np.testing.assert_array_equal(wide, -15 + i // 2 + 1 + 5)

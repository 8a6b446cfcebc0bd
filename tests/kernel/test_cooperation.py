"""Cooperation on the CPU interpreter: shared arrays, barriers, atomics, device functions and
multi-dimensional indexing give numpy's results, and every misuse of cooperation is a typed
error naming its line."""

from __future__ import annotations

import numpy as np
import pytest
from support import coop_kernels as ck
from support import coop_misuse as cm
from support import coop_remote
from support import launch_checks as lc
from support.source_marks import marker_line
from support.webgpu_harness import View, on_interpreter

from tenferro_host.errors import ValidationError
from tenferro_host.kernel._cooperation import (
    CooperationError,
    DivergentBarrierError,
    SharedRaceError,
    UnwrittenSharedReadError,
)

RNG = np.random.default_rng(14)


def test_block_sum_of_a_vector_equals_numpy() -> None:
    x = RNG.standard_normal(2**16 + 3).astype(np.float32)
    (out, _) = on_interpreter(
        ck.block_sum, 32, ck.CUBE, View.compact(np.zeros(1, np.float32)), View.compact(x)
    )
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.parametrize("order", ["C", "F"])
def test_column_sums_of_any_layout_equal_numpy(order: str) -> None:
    m = np.asarray(RNG.standard_normal((301, 9)), order=order)
    storage = m.ravel(order="K").copy()
    strides = tuple(s // m.itemsize for s in m.strides)
    (out, _) = on_interpreter(
        ck.column_sums, 9, ck.CUBE, View.compact(np.zeros(9)), View(storage, 0, m.shape, strides)
    )
    np.testing.assert_allclose(out, m.sum(axis=0), rtol=1e-12)


def test_histogram_with_shared_atomics_equals_bincount() -> None:
    x = RNG.integers(0, 10_000, 7_000).astype(np.uint32)
    (counts, _) = on_interpreter(
        ck.histogram,
        -(-x.size // 128),
        128,
        View.compact(np.zeros(50, np.uint32)),
        View.compact(x),
        bins=50,
    )
    np.testing.assert_array_equal(counts, np.bincount(x % 50, minlength=50))


def test_prefix_sum_within_each_cube_equals_cumsum() -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    (out, _) = on_interpreter(
        ck.prefix_sum, 4, ck.CUBE, View.compact(np.zeros_like(x)), View.compact(x)
    )
    expected = np.concatenate([np.cumsum(x[k : k + ck.CUBE]) for k in range(0, x.size, ck.CUBE)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_tiled_matmul_equals_numpy_on_a_transposed_view() -> None:
    a = RNG.standard_normal((37, 29)).astype(np.float32)
    b = RNG.standard_normal((41, 29)).astype(np.float32)  # used as b.T: strides (29, 1)
    bt = View(View.compact(b).storage, 0, (29, 41), (41, 1))
    grid = (-(-41 // ck.TILE), -(-37 // ck.TILE))
    (c, _, _) = on_interpreter(
        ck.matmul,
        grid,
        (ck.TILE, ck.TILE),
        View.compact(np.zeros((37, 41), np.float32)),
        View.compact(a),
        bt,
    )
    np.testing.assert_allclose(c.reshape(41, 37).T, a @ b.T, rtol=1e-4, atol=1e-4)


def test_multi_dimensional_indexing_uses_shape_and_strides() -> None:
    m = RNG.standard_normal((5, 7)).astype(np.float32)
    out = View.compact(np.zeros((7, 5), np.float32))
    (got, _) = on_interpreter(ck.transpose_nd, (1, 1), (8, 8), out, View.compact(m))
    np.testing.assert_array_equal(got.reshape(5, 7).T, m.T)


def test_nested_device_functions_with_early_returns() -> None:
    src = RNG.standard_normal(10).astype(np.float32)
    (out, _) = on_interpreter(
        ck.device_functions, 1, 16, View.compact(np.zeros(16, np.float32)), View.compact(src)
    )
    np.testing.assert_array_equal(out, 2 * src[np.minimum(np.arange(16), 9)])


def test_generic_function_and_procedure_with_early_return() -> None:
    src = RNG.standard_normal(13).astype(np.float32)
    idx = RNG.integers(0, 100, 40).astype(np.int32)
    before = np.full(40, 7.0, np.float32)
    (out, _, _) = on_interpreter(
        ck.device_procedures, 1, 64, View.compact(before), View.compact(src), View.compact(idx)
    )
    picked = src[(2 * idx) % 13]
    np.testing.assert_array_equal(out, np.where(picked > 0, picked, before))


OPS = ["add", "min", "max", "exchange", "compare_exchange"]


def _apply(op: int, old: np.ndarray, v: np.ndarray) -> np.ndarray:
    if op == 0:
        return old + v
    if op in (1, 2):
        return (np.minimum if op == 1 else np.maximum)(old, v)
    if op == 3:
        return v
    return np.where(old == v, v + v, old)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint32", "int64"])
@pytest.mark.parametrize("op", range(5), ids=OPS)
def test_uncontended_atomics_return_the_old_value(dtype: str, op: int) -> None:
    kern, args = lc.uncontended_atomics(RNG, dtype)
    old, mem, _ = on_interpreter(kern, 1, 64, *args, op=op, slots=50)
    mem0, v = args[1].storage, args[2].storage
    np.testing.assert_array_equal(old, mem0)
    np.testing.assert_array_equal(mem, _apply(op, mem0, v))


@pytest.mark.parametrize("op", range(4), ids=OPS[:4])
def test_contended_atomics_apply_in_lane_order(op: int) -> None:
    n, slots = 64, 3
    mem0 = np.array([5, -7, 100], np.int32)
    v = RNG.integers(-50, 50, n).astype(np.int32)
    old, mem, _ = on_interpreter(
        ck.atomic_int,
        1,
        64,
        View.compact(np.zeros(n, np.int32)),
        View.compact(mem0),
        View.compact(v),
        op=op,
        slots=slots,
    )
    for j in range(slots):
        current = mem0[j]
        for i in range(j, n, slots):
            assert old[i] == current
            current = _apply(op, np.array([current]), np.array([v[i]]))[0]
        assert mem[j] == current


def test_float_compare_exchange_compares_bit_patterns() -> None:
    args = lc.bit_pattern_exchange()
    old, mem, _ = on_interpreter(ck.atomic_float, 1, 4, *args, op=4, slots=3)
    # +0 and -0 differ in their bits: no exchange; NaN and -0 match theirs
    assert np.signbit(mem[0]) == np.False_ and np.isnan(mem[1]) and np.signbit(mem[2])
    np.testing.assert_array_equal(old.view(np.uint32), args[1].storage.view(np.uint32))


def test_float_atomics_on_shared_memory() -> None:
    x = RNG.standard_normal(3 * 64).astype(np.float32)
    (out, _) = on_interpreter(
        ck.shared_atomics, 3, 64, View.compact(np.zeros(24, np.float32)), View.compact(x)
    )
    per = x.reshape(3, 16, 4)
    expected = np.concatenate([per.sum(axis=1), per.max(axis=1)], axis=1).reshape(-1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


MISUSES = [
    (cm.barrier_in_branch, "divergent", DivergentBarrierError, "reached by 16 of the 64 units"),
    (cm.barrier_after_return, "returned", DivergentBarrierError, "reached by 8 of the 64"),
    (cm.read_before_barrier, "read-race", SharedRaceError, "unit 0 reads it while unit 1 wrote"),
    (cm.write_after_read, "write-race", SharedRaceError, "writes it while unit 63 read it"),
    (cm.same_element_writes, "write-write", SharedRaceError, "in the same statement"),
    (cm.plain_read_of_atomics, "atomic-race", SharedRaceError, "updated \\(atomically\\)"),
    (cm.unwritten_read, "unwritten", UnwrittenSharedReadError, "element 32 of shared array 's'"),
    (cm.unwritten_atomic, "unwritten-atomic", UnwrittenSharedReadError, "no unit of cube 0"),
]


@pytest.mark.parametrize("kern,mark,error,message", MISUSES, ids=[m[1] for m in MISUSES])
def test_misused_cooperation_is_a_located_typed_error(kern, mark, error, message) -> None:
    dtype = np.uint32 if "atomic" in mark else np.float32
    out = View.compact(np.zeros(128, dtype))
    with pytest.raises(error, match=message) as info:
        on_interpreter(kern, 2, 64, out)
    assert isinstance(info.value, CooperationError) and isinstance(info.value, ValidationError)
    assert f"coop_misuse.py:{marker_line(cm, f'# MARK {mark}')}:" in str(info.value)


def test_barriers_in_cube_uniform_control_flow_are_legal() -> None:
    (out,) = on_interpreter(
        cm.barrier_in_cube_uniform_branches, 3, 64, View.compact(np.zeros(192, np.uint32))
    )
    expected = np.concatenate([(np.arange(64) + 1) % 64, np.zeros(64), np.ones(64)])
    np.testing.assert_array_equal(out, expected)


def test_lines_of_a_device_function_from_another_module_name_its_file() -> None:
    with pytest.raises(DivergentBarrierError) as info:
        on_interpreter(cm.barrier_in_remote_function, 1, 64, View.compact(np.zeros(64, np.float32)))
    line = marker_line(coop_remote, "# MARK remote-barrier")
    assert f"{coop_remote.__file__}:{line}:" in str(info.value)


@pytest.mark.parametrize(
    "op,negative",
    [(1, [True, True, False, True]), (2, [False, False, False, True])],
    ids=["min", "max"],
)
def test_float_atomic_min_max_of_two_zeros_follow_k_min_max(op: int, negative: list) -> None:
    mem0 = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
    v = np.array([-0.0, 0.0, 0.0, -0.0], np.float32)
    _, mem, _ = on_interpreter(
        ck.atomic_float,
        1,
        4,
        View.compact(np.zeros(4, np.float32)),
        View.compact(mem0),
        View.compact(v),
        op=op,
        slots=4,
    )
    assert list(np.signbit(mem)) == negative

"""Cooperation through the CUDA JIT session equals numpy: the shared-memory sum of a 2^24-element
vector (2^16 on the fake seam, which runs the interpreter), column sums of a column-major matrix,
a histogram with atomics, a prefix sum within a cube and the tiled matmul. Each runs on the fake
raw seam (CPU) and, marked ``gpu``/``cuda``, on a CUDA device."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from support import coop_kernels as ck
from support import launch_checks as lc
from support.cuda_jit_harness import Target, View, assert_same, on_target

RNG = np.random.default_rng(2014)


def test_block_sum_of_a_large_vector(target: Target) -> None:
    n = 2**24 if target.name == "cuda" else 2**16
    x = RNG.standard_normal(n).astype(np.float32)
    cubes = 1024 if target.name == "cuda" else 16
    (out, _) = on_target(
        target, ck.block_sum, cubes, ck.CUBE, View.compact(np.zeros(1, np.float32)), View.compact(x)
    )
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-4, atol=1e-2)


def test_column_sums_of_a_column_major_matrix(target: Target) -> None:
    m = RNG.standard_normal((1000, 33))
    (out, _) = on_target(
        target, ck.column_sums, 33, ck.CUBE, View.compact(np.zeros(33)), View.compact(m)
    )
    np.testing.assert_allclose(out, m.sum(axis=0), rtol=1e-12, atol=1e-12)


def test_histogram(target: Target) -> None:
    x = RNG.integers(0, 2**31, 50_000).astype(np.uint32)
    (counts, _) = on_target(
        target,
        ck.histogram,
        -(-x.size // 256),
        256,
        View.compact(np.zeros(64, np.uint32)),
        View.compact(x),
    )
    np.testing.assert_array_equal(counts, np.bincount(x % 64, minlength=64))


def test_prefix_sum_within_a_cube(target: Target) -> None:
    x = RNG.standard_normal(5000).astype(np.float32)
    (out, _) = on_target(
        target,
        ck.prefix_sum,
        -(-x.size // ck.CUBE),
        ck.CUBE,
        View.compact(np.zeros_like(x)),
        View.compact(x),
    )
    expected = np.concatenate([np.cumsum(x[k : k + ck.CUBE]) for k in range(0, x.size, ck.CUBE)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_tiled_matmul(target: Target) -> None:
    a = RNG.standard_normal((70, 45)).astype(np.float32)
    b = RNG.standard_normal((45, 33)).astype(np.float32)
    grid = (-(-33 // ck.TILE), -(-70 // ck.TILE))
    (c, _, _) = on_target(
        target,
        ck.matmul,
        grid,
        (ck.TILE, ck.TILE),
        View.compact(np.zeros((70, 33), np.float32)),
        View.compact(a),
        View.compact(b),
    )
    np.testing.assert_allclose(c.reshape(33, 70).T, a @ b, rtol=1e-4, atol=1e-4)


def test_float_atomics_in_shared_memory(target: Target) -> None:
    lc.check_shared_float_atomics(partial(on_target, target), RNG)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint32", "int64"])
@pytest.mark.parametrize("op", range(5), ids=["add", "min", "max", "exchange", "cas"])
def test_uncontended_atomics_equal_the_interpreter(target: Target, dtype: str, op: int) -> None:
    kern, args = lc.uncontended_atomics(RNG, dtype)
    assert_same(target, kern, 1, 64, *args, op=op, slots=50)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("op", range(3), ids=["add", "min", "max"])
def test_contended_atomics_reach_numpy_results(target: Target, dtype: str, op: int) -> None:
    n, slots = 4096, 5
    v = RNG.integers(-100, 100, n).astype(dtype)
    kern = ck.atomic_float if np.dtype(dtype).kind == "f" else ck.atomic_int
    (_, mem, _) = on_target(
        target,
        kern,
        n // 256,
        256,
        View.compact(np.zeros(n, dtype)),
        View.compact(np.zeros(slots, dtype)),
        View.compact(v),
        op=op,
        slots=slots,
    )
    reduce = (np.sum, np.min, np.max)[op]
    expected = [reduce(np.r_[v[j::slots], 0]) for j in range(slots)]  # exact: small ints
    np.testing.assert_array_equal(mem, np.array(expected, dtype))


@pytest.mark.parametrize("op", [1, 2], ids=["min", "max"])
def test_float_atomic_min_max_of_two_zeros_equal_the_interpreter(target: Target, op: int) -> None:
    lc.check_min_max_of_two_zeros(partial(on_target, target), op)

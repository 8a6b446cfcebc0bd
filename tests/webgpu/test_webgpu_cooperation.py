"""Cooperation on WebGPU (the software adapter in CI): the cooperation kernels equal numpy and the
CPU interpreter; atomics on storage and workgroup memory return old values; limits are typed."""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any

import numpy as np
import pytest
from support import coop_kernels as ck
from support import launch_checks as lc
from support.webgpu_harness import View, assert_same, on_target, webgpu_jit

from tenferro_host.errors import UnsupportedError

RNG = np.random.default_rng(1414)


def run(rt: Any, kernel: Any, count: Any, dim: Any, *args: Any, **consts: Any) -> list[Any]:
    return on_target(rt, lambda: webgpu_jit(rt), kernel, count, dim, *args, **consts)


def test_block_sum_equals_numpy_and_the_interpreter(rt: Any) -> None:
    x = RNG.standard_normal(2**16 + 5).astype(np.float32)
    args = (View.compact(np.zeros(1, np.float32)), View.compact(x))
    (out, _) = run(rt, ck.block_sum, 32, ck.CUBE, *args)
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)
    # the 32 cubes' atomic adds of their partial sums land in any order: not bit-reproducible
    assert_same(rt, ck.block_sum, 32, ck.CUBE, *args, rtol=1e-5)


@pytest.mark.parametrize("transposed", [False, True])
def test_column_sums_of_a_column_major_matrix(rt: Any, transposed: bool) -> None:
    m = RNG.standard_normal((9, 301) if transposed else (301, 9)).astype(np.float32)
    view = View.compact(m)
    if transposed:  # m.T: a (301, 9) view with strides (9, 1)
        view = View(view.storage, 0, (301, 9), (9, 1))
        m = m.T
    args = (View.compact(np.zeros(9, np.float32)), view)
    (out, _) = run(rt, ck.column_sums, 9, ck.CUBE, *args)
    np.testing.assert_allclose(out, m.sum(axis=0), rtol=1e-5, atol=1e-5)
    assert_same(rt, ck.column_sums, 9, ck.CUBE, *args, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cube", [32, 64, 128])
@pytest.mark.parametrize("n", [1, 31, 1000, 4099])
def test_sum_and_scan_for_every_cube_size(rt: Any, cube: int, n: int) -> None:
    x = RNG.integers(-9, 9, n).astype(np.float32)  # small ints: every order sums exactly
    (total, _) = run(
        rt, ck.block_sum, 5, cube, View.compact(np.zeros(1, np.float32)), View.compact(x), cube=cube
    )
    assert total[0] == x.sum()
    count = -(-n // cube)
    (scan, _) = run(
        rt, ck.prefix_sum, count, cube, View.compact(np.zeros_like(x)), View.compact(x), cube=cube
    )
    expected = np.concatenate([np.cumsum(x[k : k + cube]) for k in range(0, n, cube)])
    np.testing.assert_array_equal(scan, expected)


def test_histogram_equals_bincount(rt: Any) -> None:
    x = RNG.integers(0, 10_000, 7_000).astype(np.uint32)
    args = (View.compact(np.zeros(50, np.uint32)), View.compact(x))
    (counts, _) = run(rt, ck.histogram, -(-x.size // 128), 128, *args, bins=50)
    np.testing.assert_array_equal(counts, np.bincount(x % 50, minlength=50))
    assert_same(rt, ck.histogram, -(-x.size // 128), 128, *args, bins=50)


def test_prefix_sum_within_a_cube(rt: Any) -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    args = (View.compact(np.zeros_like(x)), View.compact(x))
    (out, _) = run(rt, ck.prefix_sum, 4, ck.CUBE, *args)
    expected = np.concatenate([np.cumsum(x[k : k + ck.CUBE]) for k in range(0, x.size, ck.CUBE)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert_same(rt, ck.prefix_sum, 4, ck.CUBE, *args)


def test_tiled_matmul(rt: Any) -> None:
    a = RNG.standard_normal((37, 29)).astype(np.float32)
    b = RNG.standard_normal((29, 41)).astype(np.float32)
    args = (View.compact(np.zeros((37, 41), np.float32)), View.compact(a), View.compact(b))
    grid = (-(-41 // ck.TILE), -(-37 // ck.TILE))
    (c, _, _) = run(rt, ck.matmul, grid, (ck.TILE, ck.TILE), *args)
    np.testing.assert_allclose(c.reshape(41, 37).T, a @ b, rtol=1e-4, atol=1e-4)
    assert_same(rt, ck.matmul, grid, (ck.TILE, ck.TILE), *args)


def test_device_functions_and_multi_dimensional_indexing(rt: Any) -> None:
    src = RNG.standard_normal(10).astype(np.float32)
    assert_same(
        rt, ck.device_functions, 1, 16, View.compact(np.zeros(16, np.float32)), View.compact(src)
    )
    m = RNG.standard_normal((5, 7)).astype(np.float32)
    (out, _) = run(
        rt,
        ck.transpose_nd,
        (1, 1),
        (8, 8),
        View.compact(np.zeros((7, 5), np.float32)),
        View.compact(m),
    )
    np.testing.assert_array_equal(out.reshape(5, 7).T, m.T)


def test_generic_function_and_procedure_with_early_return(rt: Any) -> None:
    src = RNG.standard_normal(13).astype(np.float32)
    idx = RNG.integers(0, 100, 40).astype(np.int32)
    assert_same(
        rt,
        ck.device_procedures,
        1,
        64,
        View.compact(np.full(40, 7.0, np.float32)),
        View.compact(src),
        View.compact(idx),
    )


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("op", range(5), ids=["add", "min", "max", "exchange", "cas"])
def test_uncontended_atomics_equal_the_interpreter(rt: Any, dtype: str, op: int) -> None:
    kern, args = lc.uncontended_atomics(RNG, dtype)
    assert_same(rt, kern, 1, 64, *args, op=op, slots=50)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("op", range(3), ids=["add", "min", "max"])
def test_contended_atomics_reach_numpy_results(rt: Any, dtype: str, op: int) -> None:
    n, slots = 4096, 5
    mem0 = np.zeros(slots, dtype)
    v = RNG.integers(-100, 100, n).astype(dtype)
    kern = ck.atomic_float if dtype == "float32" else ck.atomic_int
    old, mem, _ = run(
        rt,
        kern,
        n // 256,
        256,
        View.compact(np.zeros(n, dtype)),
        View.compact(mem0),
        View.compact(v),
        op=op,
        slots=slots,
    )
    reduce = (np.sum, np.min, np.max)[op]
    for j in range(slots):
        mine, seen = v[j::slots], old[j::slots]
        assert mem[j] == (mine.sum() if op == 0 else reduce(np.r_[mine, 0]))  # exact: small ints
        if op == 0:  # the old values chain: each is the sum before one unit's addition
            np.testing.assert_array_equal(
                np.sort(np.r_[seen, mem[j]]), np.sort(np.r_[mem0[j], seen + mine])
            )


def test_float_atomics_on_workgroup_memory(rt: Any) -> None:
    lc.check_shared_float_atomics(partial(run, rt), RNG)


def test_float_compare_exchange_compares_bit_patterns(rt: Any) -> None:
    assert_same(rt, ck.atomic_float, 1, 4, *lc.bit_pattern_exchange(), op=4, slots=3)


@pytest.mark.parametrize("op", [1, 2], ids=["min", "max"])
def test_float_atomic_min_max_of_two_zeros_equal_the_interpreter(rt: Any, op: int) -> None:
    lc.check_min_max_of_two_zeros(partial(run, rt), op)


def test_workgroup_memory_beyond_the_webgpu_limit_is_unsupported(rt: Any) -> None:
    x = View.compact(np.zeros(8, np.float32))
    limit = rt.device_info.max_compute_workgroup_storage_size
    with pytest.raises(UnsupportedError, match=f"adapter grants {limit} bytes of workgroup"):
        run(rt, ck.block_sum, 1, 256, View.compact(np.zeros(1, np.float32)), x, cube=2**16)


def test_64_bit_atomics_are_refused_by_the_portability_rule(rt: Any) -> None:
    z = View.compact(np.zeros(4, np.int64))
    with pytest.raises(UnsupportedError, match="shader-int64"):
        run(rt, ck.atomic_int, 1, 4, z, z, z, op=0, slots=4)


def test_wgsl_lines_of_an_inlined_function_locate_its_file() -> None:
    from support import coop_misuse as cm
    from support import coop_remote
    from tenferro_host_webgpu import _wgsl as wgsl

    from tenferro_host import dtypes
    from tenferro_host import kernel as K

    spec = cm.barrier_in_remote_function.specialize([K.ArrayDesc(dtypes.float32, 1)], {}, "webgpu")
    program = wgsl.generate(spec, (64, 1, 1), (0,), folded=False)
    lines = program.source.splitlines()
    barrier = next(
        n
        for n, text in enumerate(lines, start=1)
        if "workgroupBarrier" in text and "coop_remote" in program.locate(n)
    )
    source = inspect.getsource(coop_remote).splitlines()
    line = next(n for n, text in enumerate(source, start=1) if text.endswith("remote-barrier"))
    assert program.locate(barrier).endswith(f"{coop_remote.__file__}:{line})")
    first = next(n for n, text in enumerate(lines, start=1) if "workgroupBarrier" in text)
    assert cm.__file__ in program.locate(first)  # the kernel's own barrier

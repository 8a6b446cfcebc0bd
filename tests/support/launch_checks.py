"""Launch checks that more than one target runs the same way (the CUDA JIT session, WebGPU, the
interpreter): each test passes its target's launcher, so one kernel, data and expectation serve
every target instead of a copy per test file.

A ``Launch`` is a target's ``assert_same`` (or ``on_target``) with the target bound: it takes a
kernel, a count, a dim, the arguments and the keyword constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from support import coop_kernels as ck
from support import kernels
from support import register_kernels as rk
from support.dsl_harness import View
from support.webgpu_harness import on_interpreter
from tenferro_host import kernel as K

Launch = Callable[..., Any]

SEEDS = st.integers(0, 2**16)

#: 3-D counts (an empty one included) and dims of the launch-index tests.
GRID_COUNTS = st.tuples(st.integers(0, 5), st.integers(1, 4), st.integers(1, 3))
GRID_DIMS = st.sampled_from([(1, 1, 1), (4, 1, 1), (2, 3, 1), (2, 2, 2)])
#: Lowered grid limits and the counts that exceed them, for the fold tests.
FOLD_LIMITS = st.integers(2, 6)
FOLD_COUNTS = st.tuples(st.integers(1, 40), st.integers(1, 3), st.integers(1, 2))
FOLD_DIM = (2, 1, 1)
#: A matrix's rows, columns and data seed, for the strided-view tests.
STRIDED_DRAWS = {"rows": st.integers(0, 40), "cols": st.integers(0, 40), "seed": SEEDS}
#: A vector's length, offset, step and data seed, for the offset-and-step view tests.
STEP_DRAWS = {
    "n": st.integers(1, 400),
    "offset": st.integers(0, 17),
    "step": st.integers(1, 4),
    "seed": SEEDS,
}


def check_launch_indices(
    same: Launch, kernel: K.Kernel, slots: int, count: tuple[int, int, int], dim: tuple[int, ...]
) -> None:
    """``kernel`` writes ``slots`` launch indices per thread; 7 marks a slot left unwritten."""
    threads = int(np.prod(count) * np.prod(dim))
    out = View.compact(np.full(slots * threads, 7, np.uint32))
    same(kernel, count, dim, out)


def fits_folded(count: tuple[int, int, int], limit: int) -> bool:
    """Whether ``count`` cubes fold into a grid of ``limit`` per dimension (else it is an error,
    which the session tests check)."""
    return -(-int(np.prod(count)) // limit**2) <= limit


def check_fold(same: Launch, kernel: K.Kernel, slots: int, count: tuple[int, int, int]) -> None:
    """A count beyond the (lowered) grid limit folds, yet the launch indices and an elementwise
    add stay those of the count."""
    cubes = int(np.prod(count))
    n = cubes * FOLD_DIM[0]
    same(kernel, count, FOLD_DIM, View.compact(np.zeros(slots * n, np.uint32)))
    x = View.compact(np.arange(n, dtype=np.float32))
    y = View.compact(np.ones(n, np.float32))
    o = View.compact(np.zeros(n, np.float32))
    same(kernels.add, (cubes, 1, 1), FOLD_DIM, o, x, y)


def check_strided_views(same: Launch, rng: np.random.Generator, rows: int, cols: int) -> None:
    """A transpose and row sums read a non-compact view (another array's transpose) with its
    strides."""
    base = View.compact(rng.standard_normal((cols, rows)).astype(np.float32))
    view = View(base.storage, 0, (rows, cols), (cols, 1))
    out = View.compact(np.zeros((rows, cols), np.float32))
    same(kernels.transpose_2d, -(-rows * cols // 64), 64, out, view)
    sums = View.compact(np.zeros(rows, np.float32))
    same(kernels.row_sums, -(-rows // 32), 32, sums, view, rtol=1e-5, atol=1e-5)


def check_step_view(same: Launch, storage: np.ndarray, offset: int, n: int, step: int) -> None:
    """An add reads a vector that starts at ``offset`` of ``storage`` and steps by ``step``."""
    x = View(storage, offset, (n,), (step,))
    out = View.compact(np.zeros(n, storage.dtype))
    same(kernels.add, -(-n // 64), 64, out, x, x)


def check_aliased_views(same: Launch) -> None:
    """Views of one storage (written even elements and read odd ones; one view read twice and
    written in place) alias as they do on the interpreter."""
    storage = np.arange(20, dtype=np.float32)
    out = View(storage, 0, (10,), (2,))  # not compact
    lhs = View(storage, 1, (10,), (2,))
    same(kernels.add, 1, 16, out, lhs, lhs)
    inplace = View(storage, 0, (20,), (1,))
    same(kernels.add, 1, 32, inplace, inplace, inplace)


def check_register_arrays(
    same: Launch, rng: np.random.Generator, rows: tuple[int, int], picks: tuple[int, int]
) -> None:
    """``scaled_row_sums`` on the ``rows`` (count, dim) launch, ``picked`` on the ``picks`` one,
    and every form of ``static_range``."""
    units = rows[0] * rows[1]
    x = rng.standard_normal(8 * units).astype(np.float32)
    same(rk.scaled_row_sums, *rows, View.compact(np.zeros(units, np.float32)), View.compact(x))
    units = picks[0] * picks[1]
    ints = rng.integers(-50, 50, 16 * units).astype(np.int32)
    out = View.compact(np.zeros(units, np.int32))
    same(rk.picked, *picks, out, View.compact(ints), np.uint32(7))
    same(rk.steps, 1, 3, View.compact(np.zeros(3, np.int32)))


def check_shared_float_atomics(run: Launch, rng: np.random.Generator) -> None:
    """Float add and max on shared memory give numpy's per-cube sums and maxima, exactly (the
    operands are small integers)."""
    x = rng.integers(-50, 50, 3 * 64).astype(np.float32)
    (out, _) = run(
        ck.shared_atomics, 3, 64, View.compact(np.zeros(24, np.float32)), View.compact(x)
    )
    per = x.reshape(3, 16, 4)
    expected = np.concatenate([per.sum(axis=1), per.max(axis=1)], axis=1).reshape(-1)
    np.testing.assert_array_equal(out, expected)


def uncontended_atomics(
    rng: np.random.Generator, dtype: str
) -> tuple[K.Kernel, tuple[View, View, View]]:
    """The atomic kernel of ``dtype`` and its old values, memory and operands (``slots=50``, one
    unit a slot), the operands equal to the memory at every third slot, where compare-exchange
    succeeds."""
    n = 50
    mem0 = rng.integers(0, 9, n).astype(dtype)
    v = rng.integers(0, 9, n).astype(dtype)
    v[::3] = mem0[::3]
    kern = ck.atomic_float if np.dtype(dtype).kind == "f" else ck.atomic_int
    return kern, (View.compact(np.zeros(n, dtype)), View.compact(mem0), View.compact(v))


def bit_pattern_exchange() -> tuple[View, View, View]:
    """The old values, memory and operands of a float compare-exchange (``op=4, slots=3``) that
    tells bits from values: +0 and -0 differ in their bits, NaN and NaN do not."""
    mem0 = np.array([0.0, np.nan, -0.0], np.float32)
    v = np.array([-0.0, np.nan, -0.0], np.float32)
    return View.compact(np.zeros(3, np.float32)), View.compact(mem0), View.compact(v)


def check_min_max_of_two_zeros(run: Launch, op: int) -> None:
    """A float atomic min (``op=1``) or max (``op=2``) meeting +0 and -0 in both orders leaves
    the interpreter's bits."""
    args = (
        View.compact(np.zeros(4, np.float32)),
        View.compact(np.array([0.0, -0.0, 0.0, -0.0], np.float32)),
        View.compact(np.array([-0.0, 0.0, 0.0, -0.0], np.float32)),
    )
    expected = on_interpreter(ck.atomic_float, 1, 4, *args, op=op, slots=4)
    got = run(ck.atomic_float, 1, 4, *args, op=op, slots=4)
    np.testing.assert_array_equal(got[1].view(np.uint32), expected[1].view(np.uint32))

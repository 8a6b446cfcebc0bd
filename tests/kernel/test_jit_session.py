"""The JIT session API on the CPU backend, and the shared launch logic every backend inherits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from support import kernels
from support.construct_kernels import grid_indices, scalar_kinds, unguarded

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host._cpu._jit import CpuJitSession
from tenferro_host.errors import (
    DTypeError,
    ForeignRuntimeError,
    InvalidLaunchConfigError,
    SessionClosedError,
    UnsupportedError,
    ValidationError,
    WrongThreadError,
)
from tenferro_host.provider._jit_session import JitLaunch, fold_grid


@pytest.fixture
def cpu():
    return tf.Host().backend("cpu")


def test_saxpy_end_to_end_with_tensors_and_bindings(cpu):
    x = np.arange(1000, dtype=np.float32)
    y = np.linspace(0, 1, 1000, dtype=np.float32)
    tx, ty = cpu.upload(x), cpu.upload(y)
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.saxpy") as js:
        out = js.alloc_output(tx.dtype, tx.shape)
        js.launch(
            kernels.saxpy, js.cube_count_1d(1000), js.cube_dim_1d(), out, tx, js.binding(ty), 2.0
        )
    np.testing.assert_array_equal(out.download(), np.float32(2.0) * x + y)


def test_strided_view_transposed_into_compact_output(cpu):
    m = np.arange(12, dtype=np.float64).reshape(3, 4)
    view = cpu.upload(m).transpose()
    assert not view.is_compact()
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.transpose") as js:
        out = js.alloc_output(view.dtype, view.shape)
        js.launch(kernels.transpose_2d, js.cube_count_1d(12), js.cube_dim_1d(), out, view)
    np.testing.assert_array_equal(out.download(), m.T)


def test_row_sums_of_a_sliced_column_major_matrix(cpu):
    m = np.random.default_rng(1).standard_normal((6, 5))
    t = cpu.upload(m)[1:, 1:4]  # offset and non-trivial strides
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.row_sums") as js:
        out = js.alloc_output(t.dtype, (t.shape[0],))
        js.launch(kernels.row_sums, 1, 32, out, t)
    np.testing.assert_allclose(out.download(), m[1:, 1:4].sum(axis=1), rtol=1e-12)


def test_scalars_are_converted_and_constants_go_by_keyword(cpu):
    out, wide = cpu.zeros("float16", (4,)), cpu.zeros("int64", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.scalars") as js:
        js.launch(scalar_kinds, 1, 4, out, wide, np.bool_(True), 1.5, np.int64(5), 3, scale=0.25)
    np.testing.assert_array_equal(wide.download(), -15 + np.arange(4) // 2 + 1 + 5)


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((1.5, 1.5, 5, 3), DTypeError, "scalar 'flag' is bool; pass True or False"),
        ((True, 1.5, 5.5, 3), DTypeError, "scalar 'n' is int64; pass an int"),
        ((True, 1.5, 5, -1), ValidationError, "scalar 'u'=-1 does not fit uint32"),
        ((True, "x", 5, 3), ValidationError, "'h' .* must be a Tensor, a binding or a number"),
        ((True, 1.5, 5), ValidationError, "takes 6 runtime argument"),
    ],
)
def test_scalar_errors(cpu, args, error, match):
    out, wide = cpu.zeros("float16", (4,)), cpu.zeros("int64", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.scalar_errors") as js:
        with pytest.raises(error, match=match) as info:
            js.launch(scalar_kinds, 1, 4, out, wide, *args)
    assert info.value.op == "tests.scalar_errors"


def test_tensor_for_a_scalar_and_dtype_conflicts(cpu):
    f32 = cpu.zeros("float32", (4,))
    f64 = cpu.zeros("float64", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.kinds") as js:
        with pytest.raises(ValidationError, match="pass a Python or numpy number, not a tensor"):
            js.launch(kernels.saxpy, 1, 4, f32, f32, f32, f32)
        with pytest.raises(DTypeError, match=r"every K.F parameter shares one dtype"):
            js.launch(kernels.saxpy, 1, 4, f32, f64, f32, 1.0)
        with pytest.raises(ValidationError, match=r"needs a @K.kernel function"):
            js.launch(print, 1, 4)


def test_foreign_tensor_and_foreign_binding(cpu):
    other = tf.Host().backend("cpu")
    foreign = other.zeros("float32", (4,))
    mine = cpu.zeros("float32", (4,))
    with cpu.session() as s:
        ex = tf.cpu.exec_session(s)
        with ex.jit("tests.first") as first:
            bound = first.binding(mine)
        with ex.jit("tests.second") as js:
            with pytest.raises(ForeignRuntimeError):
                js.launch(kernels.add, 1, 4, foreign, mine, mine)
            with pytest.raises(SessionClosedError):
                js.launch(kernels.add, 1, 4, bound, mine, mine)
            other_binding = js.binding(mine)
        with ex.jit("tests.third") as js3:
            with pytest.raises(SessionClosedError):
                js3.launch(kernels.add, 1, 4, other_binding, mine, mine)


def test_host_array_must_be_uploaded_first(cpu):
    out = cpu.zeros("float32", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.numpy") as js:
        with pytest.raises(ForeignRuntimeError, match="upload it first"):
            js.launch(kernels.add, 1, 4, out, np.ones(4, np.float32), out)


def test_binding_of_another_open_session_is_rejected(cpu):
    mine = cpu.zeros("float32", (4,))
    with cpu.session() as s:
        ex = tf.cpu.exec_session(s)
        with ex.jit("tests.a") as a, ex.jit("tests.b") as b:
            with pytest.raises(ValidationError, match="binding of another JIT session"):
                b.launch(kernels.add, 1, 4, a.binding(mine), mine, mine)


def test_session_is_thread_bound(cpu):
    t = cpu.zeros("float32", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.thread") as js:
        errors = []

        def other():
            try:
                js.launch(kernels.add, 1, 4, t, t, t)
            except Exception as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    assert len(errors) == 1 and isinstance(errors[0], WrongThreadError)


def test_launch_without_work_is_checked_then_skipped(cpu):
    x, out = cpu.zeros("float64", (2,)), cpu.zeros("float64", (2,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.empty") as js:
        js.launch(unguarded, js.cube_count_1d(0), js.cube_dim_1d(), out, x)  # would fault
        js.launch(unguarded, (4, 0), 32, out, x)
        js.launch(unguarded, 4, (32, 1, 0), out, x)
        empty = js.alloc_output("float64", (0, 3))
        js.launch(kernels.add, js.cube_count_1d(empty.numel), js.cube_dim_1d(), empty, empty, empty)
        with pytest.raises(DTypeError):  # arguments are still checked
            js.launch(unguarded, 0, 32, out, cpu.zeros("float32", (2,)))
    np.testing.assert_array_equal(out.download(), [0.0, 0.0])


def test_launch_config_errors(cpu):
    t = cpu.zeros("float32", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.config") as js:
        with pytest.raises(InvalidLaunchConfigError, match="1 to 3 non-negative ints"):
            js.launch(kernels.add, (1, 1, 1, 1), 4, t, t, t)
        with pytest.raises(InvalidLaunchConfigError, match="1 to 3 non-negative ints"):
            js.launch(kernels.add, -1, 4, t, t, t)
        with pytest.raises(InvalidLaunchConfigError, match="at most 1024"):
            js.launch(kernels.add, 1, (64, 32), t, t, t)
        with pytest.raises(UnsupportedError, match="at most 4294967295 units"):
            js.launch(kernels.add, (2**22, 2**11), 1024, t, t, t)
        with pytest.raises(UnsupportedError, match="at most 4294967295 units"):
            js.launch(kernels.add, 2**22, 1024, t, t, t)  # exactly 2^32: the counts overflow u32
        with pytest.raises(ValidationError, match="non-negative int"):
            js.cube_count_1d(-1)


def test_negative_strides_are_unsupported(cpu):
    t = cpu.upload(np.arange(4, dtype=np.float32))[::-1]
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.negative") as js:
        with pytest.raises(UnsupportedError, match="negative stride"):
            js.binding(t)


def test_dsl_errors_carry_the_op(cpu):
    t = cpu.zeros("float32", (4,))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.dsl_op") as js:
        with pytest.raises(ValidationError) as info:
            js.launch(unguarded, 1, 8, t, t)  # 8 threads, 4 elements: out of bounds
    assert info.value.op == "tests.dsl_op"


# ------------------------------------------------------------ folding


class RecordingJit(CpuJitSession):
    """A CPU JIT session with a tiny grid limit that records what it dispatches."""

    small: tuple[int, int, int] = (4, 3, 5)

    def __init__(self, ex, op):
        super().__init__(ex, op)
        self.launches: list[JitLaunch] = []

    @property
    def max_grid(self):
        return self.small

    def _dispatch(self, launch):
        self.launches.append(launch)
        super()._dispatch(launch)


def test_count_beyond_the_grid_limit_folds(cpu):
    out = cpu.zeros("uint32", (10 * 2 * 12,))
    with cpu.session() as s:
        js = RecordingJit(tf.cpu.exec_session(s), "tests.fold")
        with js:
            js.launch(grid_indices, 10, 2, out)
    (launch,) = js.launches
    assert launch.count == (10, 1, 1) and launch.grid == (4, 3, 1)
    rows = out.download().reshape(-1, 12)
    np.testing.assert_array_equal(rows[:, 5], np.repeat(np.arange(10), 2))  # CUBE_POS_X logical


def simulate_cuda_prologue(count, grid):
    """The logical cube positions the generated CUDA prologue derives from a physical grid."""
    cx, cy, cz = count
    seen = []
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                cube = bx + grid[0] * (by + grid[1] * bz)
                if cube >= cx * cy * cz:
                    continue
                seen.append((cube % cx, (cube // cx) % cy, cube // (cx * cy)))
    return seen


@pytest.mark.parametrize(
    "count,max_grid,grid",
    [
        ((70000, 1, 1), (65535, 65535, 65535), (65535, 2, 1)),
        ((5, 1, 1), (4, 3, 5), (4, 2, 1)),
        ((50, 1, 1), (4, 3, 5), (4, 3, 5)),
        ((3, 7, 2), (4, 3, 5), (4, 3, 4)),
        ((4, 3, 5), (4, 3, 5), (4, 3, 5)),
    ],
)
def test_fold_covers_every_logical_cube_exactly_once(count, max_grid, grid):
    assert fold_grid(count, max_grid) == grid
    seen = simulate_cuda_prologue(count, grid)
    expected = [
        (x, y, z) for z in range(count[2]) for y in range(count[1]) for x in range(count[0])
    ]
    assert sorted(seen) == sorted(expected) and len(seen) == len(expected)


def test_fold_beyond_capacity_is_an_invalid_config():
    with pytest.raises(InvalidLaunchConfigError, match="even folded"):
        fold_grid((61, 1, 1), (4, 3, 5))


def test_kernel_specializations_are_cached_across_launches(cpu):
    t = cpu.zeros("float32", (4,))
    kernels.add.cache_clear()
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.cache") as js:
        for _ in range(3):
            js.launch(kernels.add, 1, 4, t, t, t)
    assert kernels.add.cache_info() == K.CacheInfo(hits=2, misses=1, maxsize=64, currsize=1)

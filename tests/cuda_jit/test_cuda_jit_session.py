"""CUDA JIT session behaviour: caches, borrows, layouts, errors, ordering with raw work.

Tests taking ``target`` run on the fake raw seam (CPU) and on CUDA; ``fake`` tests look at what
the session asked of the raw seam (compiles, launches); ``gpu`` tests need a CUDA device. Its
launch plans (the base's, replayed by the runtime's op replay) are tested over the driver
stand-in (``tests/cuda/test_jit_launch_plan_stand_in.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import construct_kernels as ck
from support import kernels
from support.cuda_jit_harness import Target, cuda_runtime, shared_host
from support.jit_fake_raw import FakeRuntimeState, fake_cuda_jit
from tenferro_host_cuda_jit._jit import CudaJitSession

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.cuda import raw


@pytest.fixture
def fake() -> FakeRuntimeState:
    return FakeRuntimeState()


@pytest.fixture
def cpu() -> Any:
    return shared_host().backend("cpu")


def f32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# ---------------------------------------------------------------- caches and packing


def test_a_specialization_is_compiled_once_per_runtime(cpu: Any, fake: FakeRuntimeState) -> None:
    x, y = cpu.upload(f32(np.arange(300))), cpu.upload(f32(np.ones(300)))
    with fake_cuda_jit(cpu, fake) as js:
        out = js.alloc_output("float32", (300,))
        for a in (1.0, 2.0, -3.0):
            js.launch(kernels.saxpy, js.cube_count_1d(300), js.cube_dim_1d(), out, x, y, a)
            np.testing.assert_array_equal(out.download(), a * np.arange(300) + 1)
        js.launch(kernels.saxpy, 1, 64, out, x, y, 1.0)  # another launch shape, the same code
        assert (fake.compiles, fake.launches) == (1, 4)
    with fake_cuda_jit(cpu, fake) as js:  # a new session: compiled code comes from the cache
        js.launch(kernels.saxpy, 2, 256, out, x, y, 1.0)
        assert (fake.compiles, fake.launches) == (1, 5)


def test_a_storage_read_then_written_is_borrowed_as_each_launch_needs(
    cpu: Any, fake: FakeRuntimeState
) -> None:
    """Each launch borrows each storage once: shared where only read, exclusive where the
    kernel writes any view of it (the fake refuses a written shared borrow)."""
    x = cpu.upload(f32([1, 2, 3]))
    with fake_cuda_jit(cpu, fake) as js:
        o1, o2 = js.alloc_output("float32", (3,)), js.alloc_output("float32", (3,))
        for _ in range(3):
            js.launch(kernels.add, 1, 32, o1, x, x)
            js.launch(kernels.add, 1, 32, o2, x, o1)
        js.launch(kernels.add, 1, 32, x, o2, o2)  # x written now
        js.launch(kernels.add, 1, 32, o1, x, x)
        b = js.binding(o2)
        js.launch(kernels.add, 1, 32, b, b, x)  # read and written through one binding
        assert fake.launches == 9
    np.testing.assert_array_equal(o1.download(), [12, 24, 36])
    np.testing.assert_array_equal(o2.download(), [9, 18, 27])


def test_bindings_and_views_of_one_storage(cpu: Any, fake: FakeRuntimeState) -> None:
    data = f32(np.arange(40))
    t = cpu.upload(data)
    with fake_cuda_jit(cpu, fake) as js:
        out = js.alloc_output("float32", (10,))
        for start in (0, 10, 30):
            js.launch(kernels.add, 1, 32, js.binding(out), t[start : start + 10], t[:10])
            np.testing.assert_array_equal(out.download(), data[start : start + 10] + data[:10])
        assert (fake.compiles, fake.launches) == (1, 3)


def test_unhashable_counts_still_launch(cpu: Any, fake: FakeRuntimeState) -> None:
    x = cpu.upload(f32([1, 2, 3]))
    with fake_cuda_jit(cpu, fake) as js:
        out = js.alloc_output("float32", (3,))
        js.launch(kernels.add, [1], [32], out, x, x)
        js.launch(kernels.add, [1], [32], out, out, x)
    np.testing.assert_array_equal(out.download(), [3, 6, 9])


def test_empty_launches_are_skipped(cpu: Any, fake: FakeRuntimeState) -> None:
    with fake_cuda_jit(cpu, fake) as js:
        e = js.alloc_output("float32", (0,))
        js.launch(kernels.saxpy, js.cube_count_1d(0), js.cube_dim_1d(), e, e, e, 1.0)
        js.launch(kernels.saxpy, (3, 0), 32, e, e, e, 1.0)
    assert (fake.compiles, fake.launches) == (0, 0)


# ---------------------------------------------------------------- borrows


def test_a_storage_read_written_and_read_again(target: Target) -> None:
    rt = target.rt
    x, y = rt.upload(f32([1, 2, 3])), rt.upload(f32([10, 20, 30]))
    with target.jit() as js:
        out = js.alloc_output("float32", (3,))
        js.launch(kernels.add, 1, 32, out, x, y)  # x read (shared borrow)
        js.launch(kernels.add, 1, 32, x, out, y)  # x written (exclusive)
        js.launch(kernels.add, 1, 32, out, x, y)  # x read again
        js.launch(kernels.add, 1, 32, y, y, y)  # in place, aliased
    np.testing.assert_array_equal(x.download(), [21, 42, 63])
    np.testing.assert_array_equal(out.download(), [31, 62, 93])
    np.testing.assert_array_equal(y.download(), [20, 40, 60])


def test_written_compact_view_and_reads_of_the_same_storage(target: Target) -> None:
    data = f32(np.arange(20))
    t = target.rt.upload(data)
    with target.jit() as js:
        js.launch(kernels.add, 1, 32, t[5:10], t[10:15], t[15:20])
    expected = data.copy()
    expected[5:10] = data[10:15] + data[15:20]
    np.testing.assert_array_equal(t.download(), expected)


@K.kernel
def double_strided(out: K.Array[K.F], x: K.Array[K.F]):
    """out = 2 x for 1-D views of any stride (indexes through the strides)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * 2.0


def test_a_non_compact_written_view(target: Target) -> None:
    data = f32(np.arange(20))
    t = target.rt.upload(data)
    with target.jit() as js:
        js.launch(double_strided, 1, 32, t[::2], t[1::2])  # one storage: aliased views
    expected = data.copy()
    expected[::2] = 2 * data[1::2]
    np.testing.assert_array_equal(t.download(), expected)


def test_a_strided_view_after_a_compact_one_gets_its_own_plan(target: Target) -> None:
    """Compactness selects the specialization, so it is part of the plan key: a plan made for
    compact views must not be replayed for a strided one of the same dtype and rank."""
    data = f32(np.arange(40))
    t = target.rt.upload(data)
    with target.jit() as js:
        out = js.alloc_output("float32", (10,))
        js.launch(double_strided, 1, 32, out, t[:10])
        js.launch(double_strided, 1, 32, out, t[::4])
        strided = out.download()
        js.launch(double_strided, 1, 32, out, js.binding(t[1::4]))
    np.testing.assert_array_equal(strided, 2 * data[::4])
    np.testing.assert_array_equal(out.download(), 2 * data[1::4])


def test_views_before_and_after_the_written_view(target: Target) -> None:
    data = f32(np.arange(20))
    t = target.rt.upload(data)
    with target.jit() as js:
        js.launch(kernels.add, 1, 32, t[10:20], t[0:10], t[0:10])
        js.launch(kernels.add, 1, 32, t[0:5], t[15:20], t[5:10])
    expected = data.copy()
    expected[10:20] = 2 * data[0:10]
    expected[0:5] = expected[15:20] + data[5:10]
    np.testing.assert_array_equal(t.download(), expected)


# ---------------------------------------------------------------- errors and limits


def test_errors_of_cached_launches_name_the_op(cpu: Any, fake: FakeRuntimeState) -> None:
    x = cpu.upload(f32([1, 2]))
    with fake_cuda_jit(cpu, fake, op="pkg.saxpy") as js:
        out = js.alloc_output("float32", (2,))
        js.launch(kernels.saxpy, 1, 32, out, x, x, 1.0)
        counters = js.alloc_output("uint32", (2,))
        js.launch(ck.loop_counter_after_loop, 1, 32, counters, 1)
        with pytest.raises(tf.ValidationError, match="does not fit uint32") as info:
            js.launch(ck.loop_counter_after_loop, 1, 32, counters, -1)  # the cached plan
        assert (info.value.op, info.value.argument) == ("pkg.saxpy", "step")
        other = cpu.upload(np.zeros(2, np.float64))
        with pytest.raises(tf.DTypeError):
            js.launch(kernels.saxpy, 1, 32, out, x, other, 1.0)


def test_the_full_checks_still_refuse_a_float_count(cpu: Any, fake: FakeRuntimeState) -> None:
    x = cpu.upload(np.arange(4, dtype=np.float32))
    with fake_cuda_jit(cpu, fake) as js:
        out = js.alloc_output("float32", (4,))
        for _ in range(3):  # the int launch's key planned (where the runtime replays)
            js.launch(kernels.add, 1, 64, out, x, x)
        with pytest.raises(tf.InvalidLaunchConfigError):  # 1.0 == 1: not a replay of it
            js.launch(kernels.add, 1.0, 64, out, x, x)
    with fake_cuda_jit(cpu, fake) as js, pytest.raises(tf.InvalidLaunchConfigError):
        js.launch(kernels.add, 1.0, 64, js.alloc_output("float32", (4,)), x, x)


def test_handles_end_with_the_session(cpu: Any, fake: FakeRuntimeState) -> None:
    x = cpu.upload(f32([1]))
    with fake_cuda_jit(cpu, fake) as js:
        b = js.binding(x)
        js.launch(kernels.add, 1, 1, x, b, b)
    with pytest.raises(tf.SessionClosedError):
        js.launch(kernels.add, 1, 1, x, x, x)
    with pytest.raises(tf.SessionClosedError):
        _ = b.tensor


def test_device_limits_and_features(
    cpu: Any, fake: FakeRuntimeState, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_cuda_jit(cpu, fake) as js:
        assert js.features == ("sm_90",)
        assert js.max_cube_threads == 1024
        assert js.max_grid == (2**31 - 1, 65535, 65535)
        monkeypatch.setattr(CudaJitSession, "max_grid_override", (7, 8, 9))
        assert js.max_grid == (7, 8, 9)
        x = cpu.upload(f32([1]))
        with pytest.raises(tf.InvalidLaunchConfigError, match="even folded"):
            js.launch(kernels.add, 7 * 8 * 9 + 1, 1, x, x, x)
        with pytest.raises(tf.InvalidLaunchConfigError, match="at most 1024"):
            js.launch(kernels.add, 1, (32, 33), x, x, x)


# ---------------------------------------------------------------- CUDA only


@pytest.mark.gpu
@pytest.mark.cuda
def test_jit_and_raw_work_are_ordered_on_one_stream_without_a_sync() -> None:
    rt = cuda_runtime()
    n = 1 << 20
    x = rt.upload(f32(np.arange(n)))
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        before = rt.stats()["synchronizations"]
        with ex.jit("tests.order") as js:
            mid = js.alloc_output("float32", (n,))
            js.launch(kernels.add, js.cube_count_1d(n), js.cube_dim_1d(), mid, x, x)
        with ex.raw("tests.order") as rs:
            module = rs.compile_nvrtc(
                'extern "C" __global__ void twice(float* o, const float* a, int n) {'
                " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = 2 * a[i]; }"
            )
            out = rs.alloc_output("float32", (n,))
            rs.launch(
                module.function("twice"),
                raw.LaunchConfig.flat(n, 256),
                [rs.tensor_mut(out), rs.tensor(mid), raw.i32(n)],
            )
        with ex.jit("tests.order") as js:
            js.launch(kernels.add, js.cube_count_1d(n), js.cube_dim_1d(), out, out, x)
        assert rt.stats()["synchronizations"] == before
    np.testing.assert_array_equal(out.download(), 5 * np.arange(n, dtype=np.float32))


@pytest.mark.gpu
@pytest.mark.cuda
def test_compiled_for_the_live_device() -> None:
    rt = cuda_runtime()
    with rt.session() as s, tf.cuda.exec_session(s).jit("tests.arch") as js:
        assert js.features == (rt.device_info.arch,)
        assert js.max_grid == rt.device_info.max_grid_dims

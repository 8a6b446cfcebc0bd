"""Context save/restore, leases and retirement, bounded caches, memory, foreign libraries."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc

import numpy as np
import pytest
from support.cuda_support import (
    ADD_SRC,
    SPIN_SRC,
    cuda_runtime,
    current_context,
    driver,
    raw_session,
)

import tenferro_host as tf
from tenferro_host.cuda import raw
from tenferro_host.provider import ResourceCache

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def rt():
    return cuda_runtime()


def _primary(rt) -> int:
    with raw_session(rt):
        return current_context()


@pytest.fixture
def foreign_context(rt):
    """A context this test created with CUDA 13's cuCtxCreate, current on this thread."""
    d = driver()
    err, dev = d.cuDeviceGet(rt.index)
    err, ctx = d.cuCtxCreate(None, 0, dev)
    assert int(err) == 0
    try:
        yield int(ctx)
    finally:
        d.cuCtxSetCurrent(d.CUcontext(0))
        d.cuCtxDestroy(ctx)


# -- context save / restore ----------
def test_context_restored_after_exit_exception_interrupt(rt, foreign_context):
    primary = _primary(rt)
    assert primary != foreign_context
    d = driver()
    d.cuCtxSetCurrent(d.CUcontext(foreign_context))
    with raw_session(rt):
        assert current_context() == primary
    assert current_context() == foreign_context
    for exc in (RuntimeError("body failed"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), raw_session(rt):
            assert current_context() == primary
            raise exc
        assert current_context() == foreign_context


def test_context_nested_two_runtimes(rt, foreign_context):
    other = tf.cuda.CudaRuntime(rt.index, host=rt.host)
    primary = _primary(rt)
    with raw_session(rt):
        with raw_session(other) as (_, rs):
            assert current_context() == primary
            rs.alloc_output(tf.float32, (4,))
        assert current_context() == primary
    assert current_context() == foreign_context


def test_context_two_threads_null_and_foreign(rt, foreign_context):
    primary = _primary(rt)
    barrier = threading.Barrier(2)
    seen: dict[str, tuple[int, int, int]] = {}

    def worker(name: str, make_foreign: bool) -> None:
        d = driver()
        ctx = None
        if make_foreign:
            _, dev = d.cuDeviceGet(rt.index)
            _, ctx = d.cuCtxCreate(None, 0, dev)
        before = current_context()
        backend = rt.host.new_backend("cuda")
        barrier.wait()
        with raw_session(backend):
            barrier.wait()  # both sessions open at once
            inside = current_context()
        seen[name] = (before, inside, current_context())
        if ctx is not None:
            d.cuCtxSetCurrent(d.CUcontext(0))
            d.cuCtxDestroy(ctx)

    threads = [
        threading.Thread(target=worker, args=("null", False)),
        threading.Thread(target=worker, args=("foreign", True)),
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen["null"] == (0, primary, 0)
    before, inside, after = seen["foreign"]
    assert before not in (0, primary) and inside == primary and after == before
    assert current_context() == foreign_context  # this thread untouched


# -- leases and retirement ----------
def test_module_dropped_after_launch_is_unloaded_only_after_the_kernel(rt):
    """No session records an event for what it launched: a dropped module is queued for
    unloading behind an event recorded at the next drain point (here the next session's
    entry), which the still-running kernel keeps pending.

    The premise is that the kernel still runs at the next session's entry. A full collection
    in between would walk the whole heap: 0.9 s in a bare script with torch, JAX, CuPy and 3M
    objects loaded, longer than the 0.1 s spin this test had, which failed late in a full GPU
    run. So the heap as it is is frozen out of the collection (``gc.freeze``) and the kernel
    spins for 1 s.
    """
    rt.synchronize()
    before = rt.stats()
    modules_before = rt.module_stats()
    gc.collect()
    gc.freeze()  # the collection below walks only what this test makes
    try:
        with raw_session(rt, "tests.spin") as (_, rs):
            module = rs.compile_nvrtc(SPIN_SRC)
            flag = rs.alloc_output(tf.int32, (1,))
            rs.launch(
                module.function("spin"),
                raw.LaunchConfig(1, 1),
                [rs.tensor_mut(flag), raw.u64(1_000_000_000)],
            )
            launched = time.perf_counter()
            del module
            gc.collect()
    finally:
        gc.unfreeze()
    assert rt.stats()["events_recorded"] == before["events_recorded"]  # none per session
    with raw_session(rt, "tests.after"):  # a drain point: the unload waits behind an event
        pass
    elapsed = time.perf_counter() - launched
    after = rt.stats()
    assert after["synchronizations"] == before["synchronizations"]
    assert after["events_recorded"] == before["events_recorded"] + 1
    assert after["leases_pending"] >= 1, f"{elapsed:.3f} s from the launch to the drain point"
    assert rt.module_stats()["unloaded"] == modules_before["unloaded"]  # still loaded
    assert flag.download()[0] == 1  # the kernel ran to its end
    rt.synchronize()
    assert rt.stats()["leases_pending"] == 0
    assert rt.module_stats()["unloaded"] == modules_before["unloaded"] + 1
    assert rt.stats()["synchronizations"] == before["synchronizations"] + 1


def test_retirement_queue_is_bounded(rt):
    """Each dropped module waits behind an event of its own drain point, which the spinning
    kernels ahead of it keep pending; with room for two, the third makes the queue wait on its
    oldest event (not a device synchronization)."""
    other = rt.host.new_backend("cuda")
    other.retirement.capacity = 2
    with raw_session(other) as (_, rs):  # compiled up front: the loop below enqueues in µs
        modules = [rs.compile_nvrtc(SPIN_SRC + f"\n// variant {i}\n") for i in range(4)]
    for i in range(4):
        with raw_session(other) as (_, rs):  # entry: the module dropped last time retires
            flag = rs.alloc_output(tf.int32, (1,))
            rs.launch(
                modules[i].function("spin"),
                raw.LaunchConfig(1, 1),
                [rs.tensor_mut(flag), raw.u64(20_000_000)],
            )
            modules[i] = None
    with raw_session(other):  # drains the last one
        pass
    stats = other.stats()
    assert len(other.retirement) <= 2 and stats["queue_full_waits"] >= 1
    assert stats["synchronizations"] == 0


def test_resource_cache_bound_and_eviction(rt):
    other = rt.host.new_backend("cuda")
    other.resources = ResourceCache(max_entries=2)
    made = []

    def maker(rs, i):
        def make():
            made.append(i)
            return rs.compile_nvrtc(ADD_SRC + f"\n// variant {i}\n")

        return make

    with raw_session(other) as (_, rs):
        first = rs.resource("k0", maker(rs, 0))
        assert rs.resource("k0", maker(rs, 0)) is first
        rs.resource("k1", maker(rs, 1))
        rs.resource("k2", maker(rs, 2))  # evicts k0
        assert made == [0, 1, 2]
        s = other.resources.stats()
        assert (s["entries"], s["evictions"], s["hits"]) == (2, 1, 1)
        rs.resource("k0", maker(rs, 0))  # made again
        assert made == [0, 1, 2, 0]
        assert s["max_entries"] == 2
    unloaded = other.module_stats()["unloaded"]
    del first
    gc.collect()
    other.synchronize()
    assert other.module_stats()["unloaded"] >= unloaded + 1


def test_ten_thousand_launches_without_memory_growth(rt):
    a = rt.upload(np.ones(1024, np.float32))
    with raw_session(rt) as (_, rs):
        fn = rs.compile_nvrtc(ADD_SRC).function("add_kernel")
        cfg = raw.LaunchConfig.flat(1024, 256)
        ref = rs.tensor(a)
        for _ in range(100):  # warm up caches and the pool
            out = rs.alloc_output(tf.float32, (1024,))
            rs.launch(fn, cfg, [rs.tensor_mut(out), ref, ref, raw.i32(1024)])
        rs.synchronize()
        used = rt.pool_stats()["used_current"]
        tracemalloc.start()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(10_000):
            out = rs.alloc_output(tf.float32, (1024,))
            rs.launch(fn, cfg, [rs.tensor_mut(out), ref, ref, raw.i32(1024)])
        grown, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rs.synchronize()
        assert rt.pool_stats()["used_current"] <= used + 64 * 4096
    assert grown - start < 512 * 1024
    assert rt.deferred_errors == 0
    np.testing.assert_array_equal(out.download(), 2 * np.ones(1024, np.float32))


def test_cublas_through_cupy_between_raw_launches(rt):
    cupy = pytest.importorskip("cupy")
    n = 64
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, n)).astype(np.float32)
    tx = rt.upload(x)
    rt.synchronize()
    syncs = rt.stats()["synchronizations"]
    with raw_session(rt, "tests.blas") as (_, rs):
        fn = rs.compile_nvrtc(ADD_SRC).function("add_kernel")
        cfg = raw.LaunchConfig.flat(n * n, 256)
        doubled = rs.alloc_output(tf.float32, (n, n))
        rs.launch(fn, cfg, [rs.tensor_mut(doubled), rs.tensor(tx), rs.tensor(tx), raw.i32(n * n)])
        product = rs.alloc_output(tf.float32, (n, n))
        src, dst = rs.tensor(doubled), rs.tensor_mut(product)

        def wrap(ref, nbytes):
            mem = cupy.cuda.UnownedMemory(ref.data_ptr_unsafe(), nbytes, owner=None)
            return cupy.ndarray((n, n), cupy.float32, cupy.cuda.MemoryPointer(mem, 0), order="F")

        # CuPy's ExternalStream takes the raw handle (Stream.from_external takes rs.stream).
        with cupy.cuda.ExternalStream(rs.stream.native_handle_unsafe()):
            a = wrap(src, n * n * 4)
            out = wrap(dst, n * n * 4)
            cupy.matmul(a, a, out=out)  # cuBLAS sgemm on the session's stream
        del src, dst, a, out  # end the borrows before reading product
        result = rs.alloc_output(tf.float32, (n, n))
        rs.launch(
            fn, cfg, [rs.tensor_mut(result), rs.tensor(product), rs.tensor(product), raw.i32(n * n)]
        )
    assert rt.stats()["synchronizations"] == syncs  # no sync between the three
    expected = 2 * ((2 * x) @ (2 * x))
    np.testing.assert_allclose(result.download(), expected, rtol=1e-3, atol=1e-2)


def test_external_stream_ordering(rt):
    cupy = pytest.importorskip("cupy")
    from cuda.core import Device

    dev = Device(rt.index)
    dev.set_current()
    foreign = dev.create_stream()
    t = rt.upload(np.ones(1 << 20, np.float32))
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        ex.signal_external(foreign)
        ex.wait_external(foreign)
    assert rt.stats()["events_recorded"] >= 2
    assert cupy is not None and t.download().sum() == 1 << 20
    foreign.close()


# -- debug mode and poisoning ----------
FAULT_SCRIPT = textwrap.dedent(
    """
    import numpy as np, tenferro_host as tf
    from tenferro_host.cuda import raw
    host = tf.Host()
    rt = host.backend("cuda")
    src = 'extern "C" __global__ void crash(int* p) { p[threadIdx.x] = 1; }'
    try:
        with rt.session() as s:
            ex = tf.cuda.exec_session(s)
            with ex.raw("faulty_pkg.crash") as rs:
                fn = rs.compile_nvrtc(src).function("crash")
                rs.launch(fn, raw.LaunchConfig(1, 32), [raw.u64(16)])
                print("NOT RAISED")
    except tf.LaunchError as exc:
        print(f"LAUNCH_ERROR {exc}")
    for make in (lambda: rt.session().__enter__(), lambda: host.new_backend("cuda"),
                 lambda: rt.upload(np.ones(2))):
        try:
            make()
            print("NOT POISONED")
        except tf.ContextPoisonedError as exc:
            print(f"POISONED {exc.device_uuid}")
    print(f"DONE {rt.stats()['debug_waits']}")
    """
)


def test_faulting_kernel_in_debug_mode_subprocess(rt):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("TENFERRO_")}
    env["TENFERRO_DEBUG_SYNC"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", FAULT_SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "NOT RAISED" not in out and "NOT POISONED" not in out, out
    line = next(ln for ln in out.splitlines() if ln.startswith("LAUNCH_ERROR"))
    for words in (
        "'crash'",
        "'faulty_pkg'",
        "faulty_pkg.crash",
        "grid=(1, 1, 1)",
        "block=(32, 1, 1)",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
    ):
        assert words in line, line
    assert out.count("POISONED " + str(rt.device)) == 3 and "DONE 1" in out

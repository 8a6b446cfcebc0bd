"""``ex.capture()`` on a real CUDA device (a native CUDA graph): replays equal eager runs of the
cuda-raw and DSL ops on new pointers, the graph's arena is freed after it dies, the lock holds
against another thread, and the bench rows run beside cuda.core's graph."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.capture_support import capture_copy_then_add, while_capturing
from support.cuda_support import cuda_runtime, shared_host
from support.kernels import saxpy
from support.op_registration import register_op
from support.referrers import referrers

import tenferro_host as tf
from tenferro_host.benchmarks import capture as capture_bench
from tenferro_host.benchmarks.capture import capture_chain

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

ADD = "ext_add_kernel.add"
DSL_ONLY = "capture_gpu.dsl_add"
AXPY = "capture_gpu.axpy"
BENCH = Path(__file__).parents[2] / "bench" / "capture_bench.py"


def _dsl_add(ex, lhs, rhs):
    from ext_add_kernel import dsl

    return dsl.add(ex, lhs, rhs)


def _axpy(ex, x, y, a=1.0):
    with ex.jit(AXPY) as js:
        out = js.alloc_output(x.dtype, x.shape)
        js.launch(saxpy, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x, y, a)
    return out


@pytest.fixture(scope="module")
def rt():
    host = shared_host()
    if DSL_ONLY not in host.registry.ops:
        add = tf.OpSpec(
            name=DSL_ONLY,
            signature=tf.Signature(inputs=("lhs", "rhs")),
            reference=lambda a, b: a + b,
            variants={"dsl": _dsl_add},
        )
        axpy = tf.OpSpec(
            name=AXPY,
            signature=tf.Signature(inputs=("x", "y"), attributes={"a": float}),
            reference=lambda x, y, a=1.0: a * x + y,
            variants={"dsl": _axpy},
        )
        for spec in (add, axpy):
            register_op(host, "capture-gpu-tests", spec)
    return cuda_runtime()


@pytest.mark.parametrize("form", ["native", "replayed"])
@pytest.mark.parametrize("op", [ADD, DSL_ONLY])
def test_replay_equals_eager_on_new_pointers(rt, op, form, monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", form)
    host = shared_host()
    a, b = (rt.upload(np.arange(4096, dtype=np.float32) * k) for k in (1, 3))
    host.run(op, a, b)  # the warm-up
    graph = capture_chain(rt, op, a, b, 10)
    assert graph.form == form, graph.why_replayed
    for k in range(3):
        x, y = (rt.upload(np.random.default_rng(k).random(4096, np.float32)) for _ in range(2))
        eager = x
        for _ in range(10):
            eager = host.run(op, eager, y)
        np.testing.assert_allclose(graph.replay(x, y).download(), eager.download(), rtol=1e-6)


def test_a_native_graph_of_raw_and_dsl_ops_replays_new_inputs_and_frees_its_arena(rt, monkeypatch):
    """``out = 3 (x + y) + y + (x + y)``: a raw add, a DSL axpy and a raw add captured as one
    CUDA graph; each replay on new tensors equals numpy, and once the graph and the tensors made
    in the block are gone, the arena's cuMemAlloc blocks are freed."""
    from tenferro_host_cuda._driver import drv

    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)  # native is the default
    host = shared_host()
    x0, y0 = (rt.upload(np.arange(4096, dtype=np.float32) * k) for k in (1, 2))
    host.run(AXPY, host.run(ADD, x0, y0), y0, a=3.0)  # the warm-up
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = ex.run(ADD, x0, y0)
            u = host.run(AXPY, t, y0, a=3.0)
            out = ex.run(ADD, u, t)
    graph = cap.graph(inputs=(x0, y0), outputs=(out,))
    assert graph.form == "native", graph.why_replayed
    hx, hy = x0.download(), y0.download()
    np.testing.assert_allclose(out.download(), 4 * (hx + hy) + hy, rtol=1e-6)  # launched once
    rng = np.random.default_rng(7)
    for _ in range(3):  # new tensors each time: moved pointers are node updates
        nx, ny = (rng.random(4096, np.float32) for _ in range(2))
        got = graph.replay(rt.upload(nx), rt.upload(ny))
        np.testing.assert_allclose(got.download(), 4 * (nx + ny) + ny, rtol=1e-5)
    np.testing.assert_allclose(out.download(), 4 * (hx + hy) + hy, rtol=1e-6)  # still its own
    blocks = list(graph._launcher.arena.blocks)
    assert len(blocks) >= 3  # t, u and out at least
    graph.close()
    del graph, cap, t, u, out, got
    gc.collect()
    for _ in range(3):
        rt.synchronize()  # drain points: the arena's release, then its event and cuMemFree
    d = drv()
    with rt.primary:
        gone = [int(d.cuMemGetAddressRange(ptr)[0]) != 0 for ptr in blocks]
    assert all(gone), (
        f"the arena's blocks are still allocated after its graph died: {_holders(blocks)}"
    )


def _holders(blocks: list[int]) -> str:
    """What still references the arena of ``blocks`` (a failure's message: under
    compute-sanitizer's host backtraces it was the frames of the capture's exit, which the
    sanitizer holds; gpu-verify asks for device backtraces only)."""
    arenas = [o for o in gc.get_objects() if type(o).__name__ == "Arena" and o.blocks == blocks]
    return f"the arena is held: {referrers(arenas[0])}" if arenas else "the arena was collected"


def test_a_same_device_copy_into_a_native_capture_is_a_constant_of_the_graph(rt, monkeypatch):
    """A copy from a second runtime on the same GPU into the captured one keeps the graph
    native: the copy is made once, when called (on the source's stream, waited for when the
    capture ends), and every replay reads it."""
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)
    host = shared_host()
    other = tf.cuda.CudaRuntime(rt.index, host=rt.host)
    hw = np.arange(4096, dtype=np.float32)
    w = other.upload(hw)
    x0 = rt.upload(np.ones(4096, np.float32))
    host.run(ADD, x0, x0)  # the warm-up
    _cap, _copy, graph, out = capture_copy_then_add(rt, other, w, x0, ADD)
    assert graph.form == "native", graph.why_replayed
    np.testing.assert_array_equal(out.download(), 1 + hw)
    rng = np.random.default_rng(3)
    for _ in range(3):
        nx = rng.random(4096, np.float32)
        np.testing.assert_allclose(graph.replay(rt.upload(nx)).download(), nx + hw, rtol=1e-6)


def test_the_lock_holds_against_another_thread_on_the_device(rt):
    host = shared_host()
    a = rt.upload(np.ones(256, np.float32))
    for _ in range(3):
        host.run(ADD, a, a)  # planned: the replay path is the one that must not slip through
    cap, seen = while_capturing(rt, lambda ex: ex.run(ADD, a, a), lambda: host.run(ADD, a, a))
    assert isinstance(seen[0], tf.CaptureError) and "locked" in str(seen[0])
    assert cap.graph(inputs=(a,)).ops == (ADD,)


def test_the_bench_rows_run_beside_cuda_cores_graph(rt, tmp_path, monkeypatch):
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)  # the subprocess's default: native
    out = tmp_path / "capture.json"
    subprocess.run(
        [sys.executable, str(BENCH), "--backend", "cuda", "--rounds", "5", "--json", str(out)],
        check=True,
    )
    rows = {r["row"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["recaptures when only values change"]["count"] == 0
    for ops in (100, 10, 1):
        assert "us_per_op" in rows[capture_bench.floor_row(ops)], ops
    assert rows["replay, captured 100-op session"]["form"] == "native"
    assert rows[capture_bench.SCALAR_NEW]["form"] == "native"  # its scalar is followed
    print(json.dumps(list(rows.values()), indent=2))


def test_a_declared_scalar_is_followed_natively_with_new_values(rt, monkeypatch):
    """``t = k * t + y`` five times, ``k`` declared: the native graph writes each replay's
    ``k`` into the kernels' parameters (no fallback to the replayed form)."""
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)
    host = shared_host()
    x0, y0 = (rt.upload(np.arange(4096, dtype=np.float32) * k) for k in (1, 2))
    host.run(AXPY, x0, y0, a=3.0)  # the warm-up
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            k = cap.scalar("k", 3.0)
            t = x0
            for _ in range(5):
                t = ex.run(AXPY, t, y0, a=k)
    graph = cap.graph(inputs=(x0, y0), outputs=(t,))
    assert graph.form == "native", graph.why_replayed
    rng = np.random.default_rng(3)
    for value in (0.5, -2.0, 0.0, 3.0, 0.5):
        nx, ny = (rng.random(4096, np.float32) for _ in range(2))
        want = nx
        for _ in range(5):
            want = np.float32(value) * want + ny
        got = graph.replay(rt.upload(nx), rt.upload(ny), k=value).download()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_view_of_an_intermediate_replays_natively(rt, monkeypatch):
    """``fuzz/02`` on the device: ``t[:]`` of a node's output reads this replay's output."""
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)
    host = shared_host()
    a, b = (rt.upload(np.full(4096, v, np.float32)) for v in (1, 2))
    host.run(ADD, a, b)
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = ex.run(ADD, a, b)
            out = ex.run(ADD, t[:], b)
    graph = cap.graph(inputs=(a, b), outputs=(out,))
    assert graph.form == "native", graph.why_replayed
    x = rt.upload(np.full(4096, 10, np.float32))
    np.testing.assert_array_equal(graph.replay(x, b).download(), np.full(4096, 14, np.float32))


@pytest.mark.parametrize("what", ["an op call that raised", "a refused upload"])
def test_a_failure_caught_inside_a_native_capture_leaves_no_graph(rt, what, monkeypatch):
    """``gpu/01``: the block catches the error and goes on; ``cap.graph()`` refuses."""
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)
    host = shared_host()
    a, b = (rt.upload(np.ones(4096, np.float32)) for _ in range(2))
    wrong = rt.upload(np.ones(4099, np.float32))
    host.run(ADD, a, b)
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            with pytest.raises(tf.TenferroError):
                if what == "a refused upload":
                    rt.upload(np.ones(4096, np.float32))
                else:
                    ex.run(ADD, a, wrong)
            out = ex.run(ADD, a, b)
    with pytest.raises(tf.CaptureError, match="made no graph"):
        cap.graph(inputs=(a, b), outputs=(out,))
    np.testing.assert_array_equal(host.run(ADD, a, b).download(), np.full(4096, 2, np.float32))

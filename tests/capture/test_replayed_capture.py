"""``ex.capture()`` in its replayed form (CPU; WebGPU where an adapter exists, llvmpipe in CI):
the graph replays what eager runs give, its signature is its slots, and each invariant is a
typed error (docs/capture.md)."""

# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from support.call_budget import calls_per_op
from support.capture_support import REFUSALS, refused_capture, while_capturing
from support.kernels import saxpy

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import CapturedGraph, _op_plan
from tenferro_host.provider._capture import captures_opened


@pytest.fixture(scope="module")
def capture_host() -> tf.Host:
    return tf.Host()


@pytest.fixture(params=["cpu", pytest.param("webgpu", marks=pytest.mark.webgpu)])
def rt(request: Any, capture_host: tf.Host) -> Any:
    """A runtime of each backend kind with a replayed capture."""
    status = capture_host.backend_status(request.param)
    if not status.available:
        pytest.skip(f"{request.param} is unavailable: {status.reason}")
    return capture_host.backend(request.param)


ADD = "ext_add_kernel.add"
AXPY = "capture_test.axpy"
COLD = "capture_test.cold"
FAULT = "capture_test.fault"


@K.kernel
def cold_copy(out: K.Array[K.F], x: K.Array[K.F]):
    """Specialized by the warm-up test only: its first launch on a backend is a miss."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i]


def _axpy(ex: Any, x: tf.Tensor, y: tf.Tensor, a: float = 1.0) -> tf.Tensor:
    with ex.jit(AXPY) as js:
        out = js.alloc_output(x.dtype, x.shape)
        js.launch(saxpy, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x, y, a)
    return out


def _cold(ex: Any, x: tf.Tensor) -> tf.Tensor:
    with ex.jit(COLD) as js:
        out = js.alloc_output(x.dtype, x.shape)
        js.launch(cold_copy, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x)
    return out


FAULTS = {"on": False}


def _fault(ex: Any, x: tf.Tensor) -> tf.Tensor:
    """A copy that reports a poisoned context while ``FAULTS["on"]`` (a replay's fault)."""
    if FAULTS["on"]:
        raise tf.ContextPoisonedError("an illegal address poisoned the context (test)")
    return ex.run(ADD, x, x)


@pytest.fixture(scope="module", autouse=True)
def ops(capture_host: tf.Host) -> None:
    view = capture_host.registry.staging("capture-tests")
    for name, variant, attributes, inputs in (
        (AXPY, _axpy, {"a": float}, ("x", "y")),
        (COLD, _cold, {}, ("x",)),
        (FAULT, _fault, {}, ("x",)),
    ):
        view.add_op(
            tf.OpSpec(
                name=name,
                signature=tf.Signature(inputs=inputs, attributes=attributes),
                reference=lambda *a, **k: a[0],
                variants={"dsl": variant},
            )
        )
    view.commit()


@pytest.fixture(autouse=True)
def warm(capture_host: tf.Host, request: Any) -> None:
    """The warm-up every capture needs: the add's kernel specialized on the test's backend."""
    rt = request.getfixturevalue("rt") if "rt" in request.fixturenames else None
    x = up(rt or capture_host.backend("cpu"), [1, 2, 3, 4])
    capture_host.run(ADD, x, x)


def up(rt: Any, values: Any) -> tf.Tensor:
    return rt.upload(np.asarray(values, np.float32))


def captured_chain(host: tf.Host, rt: Any, x: tf.Tensor, y: tf.Tensor) -> CapturedGraph:
    """``(x + y) * 2 + y`` as three captured op calls: ex.run, host.run routed, a scalar."""
    host.run(AXPY, x, y, a=2.0)  # warm-up: the kernels are specialized before the capture
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            k = cap.scalar("k", 2.0)
            t = ex.run(ADD, x, y)
            u = host.run(AXPY, t, y, a=k)  # routed into the capturing session
            out = ex.run(ADD, u, t)
    return cap.graph(inputs=(x, y), outputs=(out,))


def eager_chain(host: tf.Host, x: tf.Tensor, y: tf.Tensor, k: float = 2.0) -> np.ndarray:
    t = host.run(ADD, x, y)
    return host.run(ADD, host.run(AXPY, t, y, a=k), t).download()


def test_replay_matches_eager_on_new_tensors(capture_host, rt):
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [10, 20, 30, 40])
    graph = captured_chain(capture_host, rt, x, y)
    assert graph.ops == (ADD, AXPY, ADD) and graph.form == "replayed"
    opened = captures_opened()
    for n in range(3):  # new tensors each time: moved pointers, no recapture
        a, b = up(rt, np.arange(4) + n), up(rt, np.full(4, n * 3.0))
        np.testing.assert_array_equal(
            graph.replay(a, b).download(), eager_chain(capture_host, a, b)
        )
    np.testing.assert_array_equal(
        graph.replay(x, y, k=-1.5).download(), eager_chain(capture_host, x, y, -1.5)
    )
    assert captures_opened() == opened and graph.replays == 4


def test_the_signature_is_the_borrowed_slots(capture_host, rt):
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [5, 6, 7, 8])
    graph = captured_chain(capture_host, rt, x, y)
    assert [(s.dtype, s.shape, s.strides, s.runtime) for s in graph.slots] == [
        ("float32", (4,), (1,), rt.name)
    ] * 2
    assert all(s.domain is rt.domain for s in graph.slots)
    assert graph.scalars == {"k": 2.0}


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda rt: rt.upload(np.ones(5, np.float32)), tf.ValidationError, r"shape \(5,\)"),
        (lambda rt: rt.upload(np.ones(4, np.int32)), tf.ValidationError, "dtype int32"),
        (lambda rt: up(rt, np.ones(8))[::2], tf.ValidationError, r"strides \(2,\)"),
        (lambda rt: np.ones(4, np.float32), tf.ValidationError, "not a Tensor"),
        (
            lambda rt: rt.host.new_backend(rt.kind).upload(np.ones(4, np.float32)),
            tf.ForeignRuntimeError,
            "move it there",
        ),
    ],
    ids=["shape", "dtype", "strides", "numpy", "other runtime"],
)
def test_replay_refuses_a_tensor_that_does_not_fit_its_slot(capture_host, rt, make, error, message):
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [5, 6, 7, 8])
    graph = captured_chain(capture_host, rt, x, y)
    with pytest.raises(error, match=message):
        graph.replay(make(rt), y)
    with pytest.raises(tf.ValidationError, match="takes 2 tensors"):
        graph.replay(x)
    with pytest.raises(tf.ValidationError, match="declared float, got str"):
        graph.replay(x, y, k="3")
    with pytest.raises(tf.ValidationError, match="no scalars"):
        graph.replay(x, y, q=1.0)


def test_a_tensor_named_twice_as_inputs_is_refused(capture_host, rt):
    """Two slots of one tensor would let a replay bind two tensors where the graph reads one
    (the later one would win, silently): ``graph()`` refuses it, naming both positions."""
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [5, 6, 7, 8])
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, x, y)
    with pytest.raises(tf.ValidationError, match=r"inputs\[1\] is the tensor inputs\[0\]"):
        cap.graph(inputs=(x, x, y), outputs=(out,))
    graph = cap.graph(inputs=(x, y), outputs=(out,))
    np.testing.assert_array_equal(graph.replay(y, x).download(), [6, 8, 10, 12])


def test_replay_repeats_the_aliasing_it_was_captured_with(capture_host, rt):
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [5, 6, 7, 8])
    graph = captured_chain(capture_host, rt, x, y)
    with pytest.raises(tf.AliasingError, match="overlap in memory, unlike at capture"):
        graph.replay(x, x)  # captured with two buffers: one buffer for both is another graph
    big = up(rt, np.arange(8))
    with pytest.raises(tf.AliasingError, match="overlap"):
        graph.replay(big[0:4], big[2:6])
    graph.replay(big[0:4], big[4:8])  # one buffer, no overlap: as captured
    view = x[0:4]
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, x, view)  # two views of one buffer
    shared = cap.graph(inputs=(x, view), outputs=(out,))
    with pytest.raises(tf.AliasingError, match="do not overlap in memory, unlike at capture"):
        shared.replay(x, y)
    np.testing.assert_array_equal(shared.replay(y, y[0:4]).download(), [10, 12, 14, 16])


def test_a_graph_is_planned_as_one_op_call_keyed_as_a_handle_keys_one(capture_host, rt):
    """After two equal recordings of the whole graph (its nodes in one session) a replay is one
    backend replay of every node's launches; the key is the op handle's (the borrowed tensors'
    layouts and storage sharing, the scalars' values and exact kinds), so views, shared
    storages and other scalars replay what the nodes compute eager."""
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [10, 20, 30, 40])
    graph = captured_chain(capture_host, rt, x, y)
    for _ in range(3):
        graph.replay(x, y)
    assert list(graph.plans().values()) == (["replay"] if _op_plan.ENABLED else [])
    big = up(rt, np.arange(12))
    cases = [
        (x, y, 2.0),
        (big[0:4], big[4:8], 2.0),  # one storage, apart: keyed apart from two storages
        (big[8:12], big[0:4], 2.0),  # another offset
        (x, y, -0.0),
        (x, y, 0.0),
        (x, y, 3),  # an int where a float was declared: converted
    ]
    for a, b, k in cases * 3:
        np.testing.assert_array_equal(
            graph.replay(a, b, k=k).download(), eager_chain(capture_host, a, b, float(k))
        )
    states = graph.plans()
    assert len(states) == (len(cases) if _op_plan.ENABLED else 0)
    assert set(states.values()) <= {"replay"}


def test_new_scalar_values_run_the_nodes_eager_until_they_come_again(capture_host, rt):
    """A value new each replay is never recorded: the nodes run as the same calls eager (each
    on its own plans; for this 3-op graph 616 Python calls per replay and download against 590
    eager on the CPU, 638 against 607 on the pure-Python call, 1738 against 1707 on WebGPU: the
    graph's slot checks and key per replay), and a value that comes again is recorded, then
    planned (recording each new value made a replay 1.3x the eager calls' time on the CPU)."""
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [10, 20, 30, 40])
    graph = captured_chain(capture_host, rt, x, y)
    values = iter(np.arange(1000, dtype=np.float64) / 8)

    def replayed_call() -> Any:
        return graph.replay(x, y, k=float(next(values))).download()

    def eager_call() -> Any:
        return eager_chain(capture_host, x, y, float(next(values)))

    for _ in range(3):  # both warm (their allocations' memory made)
        replayed_call(), eager_call()
    replayed, eager = calls_per_op(replayed_call, 20), calls_per_op(eager_call, 20)
    assert replayed <= 1.1 * eager
    if _op_plan.ENABLED:
        state = graph.plans()[next(k for k in graph.plans() if "k=0.0" in k)]
        assert state == "full path: new scalar values: recorded when they come again"
    for _ in range(3):  # again: recorded twice, then planned
        np.testing.assert_array_equal(
            graph.replay(x, y, k=0.125).download(), eager_chain(capture_host, x, y, 0.125)
        )
    if _op_plan.ENABLED:
        assert graph.plans()[next(k for k in graph.plans() if "k=0.125" in k)] == "replay"


def test_a_graph_its_backend_cannot_replay_runs_its_nodes_one_by_one(capture_host, rt, monkeypatch):
    x, y = up(rt, [1, 2, 3, 4]), up(rt, [10, 20, 30, 40])
    graph = captured_chain(capture_host, rt, x, y)
    monkeypatch.setattr(type(rt), "op_replay", lambda self, rec: None)
    for _ in range(6):
        np.testing.assert_array_equal(
            graph.replay(x, y).download(), eager_chain(capture_host, x, y)
        )
    if _op_plan.ENABLED:
        (state,) = graph.plans().values()
        assert state.startswith("full path: backend") and "cannot replay" in state


def test_calls_routed_into_a_capture_do_not_count_against_their_key(capture_host, rt):
    """A call its runtime can neither replay nor record (here: routed into a capture) takes
    the full path unrecorded; its key is learned as usual once the capture is over."""
    x = up(rt, np.arange(6))  # a layout no other test calls
    for _ in range(5):
        with rt.session() as s:
            ex = s.exec_session()
            with ex.capture():
                capture_host.run(ADD, x, x)
    for _ in range(3):
        capture_host.run(ADD, x, x)
    states = capture_host.op(ADD).plans()
    expected = ["replay"] if _op_plan.ENABLED else []
    mine = [v for k, v in states.items() if k.startswith(f"{rt.name}(float32[6]")]
    assert mine == expected


def test_a_capture_locks_its_runtime_against_other_threads(capture_host, rt):
    x = up(rt, [1, 2, 3, 4])
    cap, seen = while_capturing(
        rt,
        lambda ex: ex.run(ADD, x, x),
        lambda: rt.session().__enter__(),
        lambda: capture_host.run(ADD, x, x),
    )
    for what, got in zip(("session", "host.run"), seen, strict=True):
        assert isinstance(got, tf.CaptureError), what
        assert "locked by a capture on another thread" in str(got)
    assert len(cap.graph(inputs=(x,)).ops) == 1  # nothing of the other thread was captured
    with rt.session():  # the lock ends with the capture
        pass


def test_a_specialization_inside_a_capture_names_the_op_and_its_warm_up(capture_host, rt):
    x = up(rt, [1, 2, 3, 4])
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match="not specialized") as info, ex.capture() as cap:
            ex.run(COLD, x)
    assert info.value.op == COLD and "warm-up" in str(info.value)
    with pytest.raises(tf.CaptureError, match="ended with CaptureError"):
        cap.graph()
    capture_host.run(COLD, x)  # the warm-up
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(COLD, x)
    np.testing.assert_array_equal(
        cap.graph(inputs=(x,), outputs=(out,)).replay(x).download(), x.download()
    )


REFUSED = [*REFUSALS, ("direct launch", lambda ex, x: ex.jit(ADD), "a DSL session")]


@pytest.mark.parametrize("block, what", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
@pytest.mark.parametrize("caught", [False, True], ids=["raised", "caught"])
def test_what_a_capture_cannot_hold_is_refused_and_ends_it(rt, block, what, caught):
    """The refusal ends the capture without a graph, also when the block catches it (the
    capture cannot vouch for a graph of a block that went on without the refused step)."""
    x = up(rt, [1, 2, 3, 4])
    refused_capture(rt, lambda ex: ex.run(ADD, x, x), lambda ex: block(ex, x), what, caught)


def test_a_full_retirement_queue_refuses_its_wait_and_polls_wait_for_the_end(rt):
    queue = rt.retirement
    released: list[int] = []
    x = up(rt, [1, 2, 3, 4])
    saved = queue.capacity
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            queue.retire(object(), [lambda: released.append(1)])  # a done event (CPU, llvmpipe)
            assert queue.poll() == 0 and not released  # no event query inside
            queue.capacity = len(queue)
            try:
                with pytest.raises(tf.CaptureError, match="full retirement queue"):
                    queue.retire(object(), [lambda: None])
            finally:
                queue.capacity = saved
            ex.run(ADD, x, x)
    queue.poll()
    assert released == [1]
    with pytest.raises(tf.CaptureError, match="made no graph"):
        cap.graph()  # the refusal ended the capture, though the block caught it


def test_an_exception_inside_ends_the_capture_and_drops_what_it_held(rt):
    x = up(rt, [1, 2, 3, 4])
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(KeyError), ex.capture() as cap:
            out = ex.run(ADD, x, x)
            made = weakref.ref(out.storage)
            del out
            raise KeyError("user code")
    gc.collect()
    assert made() is None and rt.active_capture is None  # no partial graph keeps the intermediate
    with pytest.raises(tf.CaptureError, match="ended with KeyError"):
        cap.graph()
    with rt.session() as s, s.exec_session().capture():
        pass  # a new capture opens


def test_an_op_error_caught_inside_still_leaves_no_graph(rt):
    x = up(rt, [1, 2, 3, 4])
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            with pytest.raises(tf.ValidationError):
                ex.run(ADD, x)  # a half-made call: the capture cannot vouch for the graph
    with pytest.raises(tf.CaptureError, match="ended with ValidationError"):
        cap.graph()


def test_a_fault_during_a_replay_names_the_node_and_its_op(capture_host, rt):
    x = up(rt, [1, 2, 3, 4])
    capture_host.run(FAULT, x)
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = ex.run(ADD, x, x)
            out = ex.run(FAULT, t)
    graph = cap.graph(inputs=(x,), outputs=(out,))
    FAULTS["on"] = True
    try:
        with pytest.raises(tf.ContextPoisonedError) as info:
            graph.replay(x)
    finally:
        FAULTS["on"] = False
    assert info.value.op == FAULT
    assert f"in node 1 (op {FAULT!r}) of a captured graph" in info.value.__notes__


def test_graph_inputs_and_outputs_must_come_from_the_capture(rt):
    x, other = up(rt, [1, 2, 3, 4]), up(rt, [0, 0, 0, 0])
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, x, x)
            with pytest.raises(tf.CaptureError, match="still open"):
                cap.graph()
    with pytest.raises(tf.ValidationError, match="inputs"):
        cap.graph(inputs=(other,))
    with pytest.raises(tf.ValidationError, match="outputs"):
        cap.graph(inputs=(x,), outputs=(x,))
    graph = cap.graph(inputs=(x,), outputs=(out,))
    graph.close()
    with pytest.raises(tf.CaptureError, match="closed"):
        graph.replay(x)


def test_a_borrowed_tensor_that_is_not_an_input_is_leased_to_the_graph(capture_host, rt):
    x = up(rt, [1, 2, 3, 4])
    bias = up(rt, [100, 200, 300, 400])
    held = weakref.ref(bias.storage)
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, x, bias)
    graph = cap.graph(inputs=(x,), outputs=(out,))
    del bias, cap
    gc.collect()
    assert held() is not None  # a constant of the graph
    np.testing.assert_array_equal(
        graph.replay(up(rt, [1, 1, 1, 1])).download(), [101, 201, 301, 401]
    )
    graph.close()
    gc.collect()
    assert held() is None


def test_a_tensor_imported_inside_a_capture_is_leased_to_the_graph(capture_host):
    rt = capture_host.backend("cpu")  # a numpy import: the CPU's DLPack (CUDA's: a GPU test)
    x = up(rt, [1, 2, 3, 4])
    foreign = np.array([5, 6, 7, 8], np.float32)
    held = weakref.ref(foreign)
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, x, rt.from_dlpack(foreign))
    graph = cap.graph(inputs=(x,), outputs=(out,))
    del foreign, cap
    gc.collect()
    assert held() is not None  # the graph holds the import, not the capture's session
    np.testing.assert_array_equal(graph.replay(x).download(), [6, 8, 10, 12])
    graph.close()
    gc.collect()
    assert held() is None


def test_caps_says_how_each_backend_captures(monkeypatch):
    """CPU and WebGPU replay; CUDA records a native graph unless TENFERRO_CUDA_GRAPHS=replayed
    asks for the replayed form (every available backend of this machine is checked; a host
    reads the variable when it loads the plugins)."""
    from tenferro_host._cli import caps_report

    for cuda_form in ("native", "replayed"):
        monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", cuda_form)
        report = caps_report(tf.Host())
        for b in report["backends"]:
            if b["available"]:
                want = cuda_form if b["name"] == "cuda" else "replayed"
                assert {d["capture"] for d in b["devices"]} == {want}, b["name"]

"""The replayed form's planned replay (docs/capture.md): a graph writes its intermediates — the
nodes' outputs a replay neither returns nor views — into tensors it holds, as a native graph's
memory is, so a replay allocates only what it returns. On the CPU, WebGPU and the CUDA
stand-in in its replayed form; values on the backends with memory, launches on the stand-in."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from support.call_budget import calls_per_op
from support.plan_backends import ADD, BACKENDS, PlanBackend, plan_backend

from tenferro_host.benchmarks.capture import capture_chain
from tenferro_host.provider import _op_plan

#: replays that plan a graph: two equal recordings, then a replay
PLANNED = 3
#: a planned graph's plan states (none where plans are off: ``TENFERRO_OP_PLAN=0``)
REPLAY = {"replay"} if _op_plan.ENABLED else set()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", "replayed")  # read when the host loads plugins
    with plan_backend(request.param) as made:
        yield made


def captured(backend: PlanBackend, body: Any) -> tuple[Any, Any]:
    """The capture of ``body(ex)`` on the backend's runtime, and what the body returned."""
    with backend.rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            made = body(ex)
    return cap, made


def test_a_planned_replay_allocates_only_what_it_returns(backend, monkeypatch):
    allocations = []
    backend.on_allocation(monkeypatch, lambda: allocations.append(1))
    a, b = backend.tensor("float32", (64,)), backend.tensor("float32", (64,))
    for _ in range(4):
        backend.host.run(ADD, a, b)  # the op's own warm-up
    graph = capture_chain(backend.rt, ADD, a, b, 10)
    assert graph.form == "replayed"
    kept = [graph.replay(a, b) for _ in range(PLANNED)]
    assert set(graph.plans().values()) == REPLAY, graph.plans()
    allocations.clear()
    kept += [graph.replay(a, b) for _ in range(3)]  # each kept: none reuses another's memory
    # the output; the nine intermediates are the graph's (plans off: each node's output)
    assert len(allocations) == (3 if _op_plan.ENABLED else 30)
    assert len({id(t.storage) for t in kept}) == len(kept)


def test_each_replay_equals_eager_and_leaves_the_capture_time_tensors_alone(host, each_rt):
    rt, up = each_rt, lambda v: each_rt.upload(np.asarray(v, np.float32))
    a, b = up(np.arange(8)), up(np.full(8, 2))

    def body(ex: Any) -> Any:
        t = ex.run(ADD, a, b)
        return t, ex.run(ADD, ex.run(ADD, t, b), b)

    cap, (t, out) = captured(PlanBackend("", host, rt), body)
    graph = cap.graph(inputs=(a, b), outputs=(out,))
    before = t.download()
    for n in range(6):
        x = up(np.arange(8) * (n + 1))
        got = graph.replay(x, b)
        np.testing.assert_array_equal(got.download(), x.download() + 6)
    assert set(graph.plans().values()) == REPLAY, graph.plans()
    np.testing.assert_array_equal(t.download(), before)  # the capture's own tensors are the user's


def test_a_returned_view_of_an_intermediate_is_fresh_each_replay(host, each_rt):
    rt, up = each_rt, lambda v: each_rt.upload(np.asarray(v, np.float32))
    a, b = up(np.arange(8)), up(np.full(8, 2))

    def body(ex: Any) -> Any:
        t = ex.run(ADD, a, b)
        return t[1::2], ex.run(ADD, t, b)

    cap, (odd, out) = captured(PlanBackend("", host, rt), body)
    graph = cap.graph(inputs=(a, b), outputs=(odd, out))
    made = [graph.replay(up(np.arange(8) * n), b) for n in range(5)]
    for n, (view, whole) in enumerate(made):  # read after every replay ran: none shares memory
        np.testing.assert_array_equal(view.download(), np.arange(8)[1::2] * n + 2)
        np.testing.assert_array_equal(whole.download(), np.arange(8) * n + 4)


def test_replays_on_two_threads_at_once_each_equal_eager(host, each_rt):
    """One thread at a time writes the held intermediates; the other meanwhile runs the nodes."""
    rt, up = each_rt, lambda v: each_rt.upload(np.asarray(v, np.float32))
    a, b = up(np.zeros(256)), up(np.ones(256))
    graph = capture_chain(rt, ADD, a, b, 20)
    wrong: list[Any] = []

    def replays(start: float) -> None:
        x = up(np.full(256, start))
        for _ in range(40):
            got = graph.replay(x, b).download()
            if not (got == start + 20).all():
                wrong.append((start, got[:4]))

    threads = [threading.Thread(target=replays, args=(s,)) for s in (0.0, 100.0)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong


def test_a_planned_replay_costs_at_most_0_8x_the_calls_per_op_of_the_same_calls_eager(backend):
    """Counted, never timed: per op a planned 100-op chain costs its launch, not an op call
    and an allocation (on the CPU 0.25 calls per op against 8.0 eager, compiled)."""
    a, b = backend.tensor("float32", (64,)), backend.tensor("float32", (64,))
    for _ in range(4):
        backend.host.run(ADD, a, b)
    graph = capture_chain(backend.rt, ADD, a, b, 100)
    for _ in range(PLANNED):
        graph.replay(a, b)

    def eager() -> None:
        y = a
        for _ in range(100):
            y = backend.host.run(ADD, y, b)

    replayed, direct = calls_per_op(lambda: graph.replay(a, b), 5), calls_per_op(eager, 5)
    print(f"{backend.name} per op: replay {replayed / 100:.2f} calls, eager {direct / 100:.2f}")
    assert replayed <= (0.8 if _op_plan.ENABLED else 1.0) * direct


def test_a_graph_that_returns_nothing_is_planned_with_every_output_held(backend, monkeypatch):
    allocations = []
    backend.on_allocation(monkeypatch, lambda: allocations.append(1))
    a, b = backend.tensor("float32", (64,)), backend.tensor("float32", (64,))
    for _ in range(4):
        backend.host.run(ADD, a, b)
    cap, _ = captured(backend, lambda ex: ex.run(ADD, ex.run(ADD, a, b), b))
    graph = cap.graph(inputs=(a, b), outputs=())
    for _ in range(PLANNED):
        assert graph.replay(a, b) == ()
    assert set(graph.plans().values()) == REPLAY, graph.plans()
    allocations.clear()
    graph.replay(a, b)
    assert len(allocations) == (0 if _op_plan.ENABLED else 2)


def test_an_empty_intermediate_is_held_like_any_other(backend):
    """An empty output no launch reads (its launch is skipped) is held like the others: the
    graph is planned (an op call with an empty output is not: its replay would allocate one),
    and a launch that did read it is refused by the seam that records it."""
    a, b = backend.tensor("float32", (64,)), backend.tensor("float32", (64,))
    e = backend.rt.empty("float32", (0,))
    for _ in range(4):
        backend.host.run(ADD, a, b), backend.host.run(ADD, e, e)
    cap, out = captured(backend, lambda ex: (ex.run(ADD, e, e), ex.run(ADD, a, b))[1])
    graph = cap.graph(inputs=(a, b, e), outputs=(out,))
    for _ in range(PLANNED + 1):
        assert graph.replay(a, b, e).shape == (64,)
    assert set(graph.plans().values()) == REPLAY, graph.plans()

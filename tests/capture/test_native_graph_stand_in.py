"""The native CUDA graph's bookkeeping without a GPU (the recording driver stand-in captures
kernel launches as nodes): a replay launches the instantiated graph on the replay's pointers
and rewrites only the nodes whose pointers moved; the capture's memory is an arena freed once
the graph and its last storage are gone; an error destroys what was captured; an upload from
host inside the capture is refused; what the native form cannot follow keeps the replayed one."""

from __future__ import annotations

import gc
import threading
import types
from typing import Any

import pytest
from support.call_budget import calls_per_op
from support.capture_support import capture_two_adds
from support.driver_stand_in import ADD, stand_in
from support.op_registration import register_ops

import tenferro_host as tf
from tenferro_host.provider import _compiled


@pytest.fixture
def world(monkeypatch) -> Any:
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)  # the default: native
    with stand_in() as world:
        x, y = world.rt.empty("float32", (64,)), world.rt.empty("float32", (64,))
        world.host.run(ADD, x, y)  # the warm-up
        yield types.SimpleNamespace(host=world.host, rt=world.rt, fake=world.fake, x=x, y=y)


def released(w: Any) -> None:
    """Collect, then run the runtime's drain points until nothing more is queued."""
    gc.collect()
    for _ in range(3):
        w.rt.drain_deferred()
        w.rt.retirement.poll()


def launched(fake: Any) -> list[dict[int, list[int]]]:
    return [arg for name, arg in fake.calls if name == "cuGraphLaunch"]


def updates(fake: Any) -> list[tuple[int, list[int]]]:
    return [arg for name, arg in fake.calls if name == "cuGraphExecKernelNodeSetParams"]


def test_the_capture_is_one_graph_launched_once_with_memory_from_its_arena(world):
    fake = world.fake
    fake.calls.clear()
    cap, t, out = capture_two_adds(world, ADD)
    names = fake.names()
    assert names.count("cuStreamBeginCapture") == 1 and names.count("cuStreamEndCapture") == 1
    assert names.count("cuMemAlloc") == 2 and "alloc" not in names  # no pool block baked in
    assert names.count("cuGraphInstantiate") == 1
    ((first, second),) = (list(words.values()) for words in launched(fake))
    assert first[:3] == [t.storage.ptr, world.x.storage.ptr, world.y.storage.ptr]
    assert second[:3] == [out.storage.ptr, t.storage.ptr, world.y.storage.ptr]
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    assert graph.form == "native" and graph.why_replayed is None


def test_a_replay_rewrites_only_the_nodes_whose_pointers_moved(world):
    rt, fake = world.rt, world.fake
    cap, t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    a, b = rt.empty("float32", (64,)), rt.empty("float32", (64,))
    fake.calls.clear()
    got = graph.replay(a, b)
    ((first, second),) = (list(words.values()) for words in launched(fake))
    assert first[:3] == [t.storage.ptr, a.storage.ptr, b.storage.ptr]
    assert second[:3] == [got.storage.ptr, t.storage.ptr, b.storage.ptr]
    assert got.storage.ptr != out.storage.ptr and len(updates(fake)) == 2
    fake.calls.clear()
    again = graph.replay(a, b)  # same inputs; only the fresh output moved: one node rewritten
    ((_node, words),) = updates(fake)
    assert words[:3] == [again.storage.ptr, t.storage.ptr, b.storage.ptr]
    assert len(launched(fake)) == 1 and "cuStreamBeginCapture" not in fake.names()
    assert graph.replays == 2 and got.storage.ptr != again.storage.ptr


def test_the_arena_is_freed_once_the_graph_and_its_last_storage_are_gone(world):
    fake = world.fake
    cap, t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    arena = set(fake.arena_live)
    assert len(arena) == 2
    graph.close()
    assert "cuGraphExecDestroy" in fake.names()
    del graph, t
    released(world)
    assert set(fake.arena_live) == arena  # `out` (and the capture) still hold the arena
    del cap, out
    released(world)
    assert not fake.arena_live
    assert world.rt.deferred_errors == 0


def test_a_collected_graph_is_destroyed_at_the_next_drain_point(world):
    fake = world.fake
    cap, t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    graph.replay(world.x, world.y)
    del graph, cap, t, out
    gc.collect()
    assert "cuGraphExecDestroy" not in fake.names()  # a finalizer never calls the driver
    released(world)
    assert "cuGraphExecDestroy" in fake.names() and not fake.execs and not fake.arena_live


def test_an_error_in_the_block_destroys_the_captured_graph(world):
    rt, fake = world.rt, world.fake
    fake.calls.clear()
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(KeyError), ex.capture() as cap:
            ex.run(ADD, world.x, world.y)
            raise KeyError("in the block")
    names = fake.names()
    assert "cuGraphDestroy" in names and "cuGraphInstantiate" not in names
    assert "allocate_bytes" not in vars(rt) and "_write" not in vars(rt)  # the runtime's again
    with pytest.raises(tf.CaptureError, match="KeyError"):
        cap.graph(inputs=(world.x,))
    released(world)
    assert not fake.arena_live and not fake.graph_nodes
    assert rt.empty("float32", (8,)).storage.release[0] == "block"  # the pool again


def test_an_upload_from_host_inside_a_native_capture_is_refused(world):
    rt, fake = world.rt, world.fake
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match="upload from host") as info, ex.capture():
            rt.upload([1.0, 2.0])
    assert "before the capture" in info.value.fix
    assert "cuGraphDestroy" in fake.names() and not fake.capturing


ZERO_ADD = "native_fills.zero_add"  # z = zeros(x); z + x: a fill of an intermediate
ZEROS = "native_fills.zeros"  # zeros(x) returned: a fill of the op's output


def _zero_add(ex: Any, x: tf.Tensor) -> tf.Tensor:
    return ex.run(ADD, ex.runtime.zeros(x.dtype, x.shape), x)


def _zeros(ex: Any, x: tf.Tensor) -> tf.Tensor:
    return ex.runtime.zeros(x.dtype, x.shape)


def fills(fake: Any) -> list[int]:
    """The fill nodes of the stand-in's graphs, by handle."""
    return [h for h, node in fake.nodes.items() if node.kind == 2]


def test_a_fill_the_block_made_is_a_constant_that_no_replay_repeats(world):
    """``zeros`` in the block is a constant of the graph (as in the replayed form): its fill
    runs in the capture's launch, and the replays' launches leave it out."""
    rt, fake = world.rt, world.fake
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            zero = rt.zeros("float32", (64,))
            out = ex.run(ADD, zero, world.y)
    (fill,) = fills(fake)
    assert ("cuGraphNodeSetEnabled", (fill, 0)) in fake.calls
    graph = cap.graph(inputs=(world.y,), outputs=(out,))
    assert graph.form == "native", graph.why_replayed
    fake.calls.clear()
    got = graph.replay(world.x)
    ((words,),) = (list(w.values()) for w in launched(fake))  # the kernel alone
    assert words[:3] == [got.storage.ptr, zero.storage.ptr, world.x.storage.ptr]


def test_an_op_calls_fill_runs_each_replay_and_one_of_an_output_keeps_the_replayed_form(world):
    rt, fake, host = world.rt, world.fake, world.host
    register_ops(host, "native-fills", "cuda-raw", {ZERO_ADD: _zero_add, ZEROS: _zeros})
    host.run(ZERO_ADD, world.x)
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ZERO_ADD, world.x)
    graph = cap.graph(inputs=(world.x,), outputs=(out,))
    assert graph.form == "native", graph.why_replayed
    (fill,) = fills(fake)
    fake.calls.clear()
    graph.replay(world.y)
    (launch,) = launched(fake)
    assert fill in launch  # the intermediate is zeroed again: the op call's own work
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            zero = ex.run(ZEROS, world.x)
            out = ex.run(ADD, zero, world.x)
    graph = cap.graph(inputs=(world.x,), outputs=(zero, out))
    assert graph.form == "replayed"
    assert "fills an input or output" in (graph.why_replayed or "")


def test_a_failed_graph_launch_names_the_graphs_ops(world):
    fake = world.fake
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    fake.launch_result = 1  # CUDA_ERROR_INVALID_VALUE
    try:
        with pytest.raises(tf.LaunchError, match="captured graph of ops") as info:
            graph.replay(world.x, world.y)
    finally:
        fake.launch_result = 0
    assert info.value.op == ADD
    assert any("native CUDA graph of 2 nodes" in n for n in info.value.__notes__)


def test_caps_says_native_for_cuda_by_default(world, monkeypatch):
    assert world.host.registry.provider("cuda").capture == "native"
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", "native")
    assert tf.Host().registry.provider("cuda").capture == "native"


def test_asked_for_the_replayed_form_cuda_captures_no_device_graph(world, monkeypatch):
    """``TENFERRO_CUDA_GRAPHS=replayed``: a capture replays its plans, caps says so, and a
    value that is no form is a typed error when a capture opens."""
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", "replayed")
    assert tf.Host().registry.provider("cuda").capture == "replayed"
    cap, _, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    assert graph.form == "replayed"
    graph_calls = ("cuStreamBeginCapture", "cuGraph")
    assert not any(name.startswith(graph_calls) for name, _ in world.fake.calls)
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", "nativ")
    with world.rt.session() as s:
        with pytest.raises(tf.ValidationError, match="TENFERRO_CUDA_GRAPHS='nativ'"):
            s.exec_session().capture().__enter__()


def test_ex_capture_inside_a_framework_capture_is_refused_before_the_stream_is_touched(world):
    rt, fake = world.rt, world.fake
    fake.calls.clear()
    with rt.foreign_capture(lambda n: None), rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match="already being captured"):
            ex.capture().__enter__()
    assert "cuStreamBeginCapture" not in fake.names() and rt.active_capture is None


def test_after_a_failed_node_update_the_next_replay_rewrites_every_pointer_node(world):
    rt, fake = world.rt, world.fake
    cap, t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    a, b = rt.empty("float32", (64,)), rt.empty("float32", (64,))
    fake.update_result = 1  # CUDA_ERROR_INVALID_VALUE
    try:
        with pytest.raises(tf.LaunchError, match="updating a node"):
            graph.replay(a, b)
    finally:
        fake.update_result = 0
    fake.calls.clear()
    got = graph.replay(a, b)
    assert len(updates(fake)) == 2  # both nodes, though a and b did not move since
    ((first, second),) = (list(words.values()) for words in launched(fake))
    assert first[:3] == [t.storage.ptr, a.storage.ptr, b.storage.ptr]
    assert second[:3] == [got.storage.ptr, t.storage.ptr, b.storage.ptr]


def test_a_capture_whose_graph_is_never_made_destroys_it_at_a_drain_point(world):
    fake = world.fake
    cap, t, out = capture_two_adds(world, ADD)
    assert fake.execs
    del cap, t, out
    released(world)
    assert not fake.execs and not fake.graph_nodes and not fake.arena_live


def test_a_graph_whose_pointers_cannot_be_found_keeps_the_replayed_form(world, monkeypatch):
    """A driver that lists no parameters must not make a native graph that never moves its
    pointers (every replay would read the capture's inputs)."""
    fake = world.fake
    monkeypatch.setattr(fake, "cuFuncGetParamInfo", lambda func, index: (1, 0, 0))
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    assert graph.form == "replayed"
    assert "input 0's address is in no kernel node's parameters" in (graph.why_replayed or "")


def test_a_view_slot_moves_by_its_offset_and_shared_memory_is_not_guessed(world):
    rt, fake, host = world.rt, world.fake, world.host
    big = rt.empty("float32", (128,))
    x = big[64:128]  # a view: the kernel reads its first element, 256 bytes into the storage
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, x, world.y)
    graph = cap.graph(inputs=(x, world.y), outputs=(out,))
    assert graph.form == "native"
    other = rt.empty("float32", (96,))
    fake.calls.clear()
    got = graph.replay(other[32:96], world.y)
    ((words,),) = (list(w.values()) for w in launched(fake))
    assert words[:3] == [got.storage.ptr, other.storage.ptr + 32 * 4, world.y.storage.ptr]
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            lo, hi = big[0:64], big[64:128]
            out = ex.run(ADD, lo, hi)  # two slots in one buffer
    shared = cap.graph(inputs=(lo, hi), outputs=(out,))
    assert shared.form == "replayed" and "share" in (shared.why_replayed or "")
    del host


def test_a_view_of_an_intermediate_and_of_an_input_keep_the_native_form(world):
    """``t[:]`` of a node's output reads the graph's own memory (no constant); ``x[32:]`` beside
    ``x`` is a view of the input (no constant sharing its memory): both follow natively."""
    rt, fake = world.rt, world.fake
    x, y = world.x, world.y
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = ex.run(ADD, x, y)
            out = ex.run(ADD, t[:], y)
            tail = ex.run(ADD, x[32:], y[32:])
    graph = cap.graph(inputs=(x, y), outputs=(out, tail))
    assert graph.form == "native", graph.why_replayed
    a, b = rt.empty("float32", (64,)), rt.empty("float32", (64,))
    fake.calls.clear()
    got, got_tail = graph.replay(a, b)
    ((first, second, third),) = (list(words.values()) for words in launched(fake))
    assert first[:3] == [t.storage.ptr, a.storage.ptr, b.storage.ptr]
    assert second[:3] == [got.storage.ptr, t.storage.ptr, b.storage.ptr]
    assert third[:3] == [got_tail.storage.ptr, a.storage.ptr + 128, b.storage.ptr + 128]


@pytest.mark.parametrize("what", ["an op call that raised", "a refused upload"])
def test_a_failure_caught_inside_the_block_leaves_no_native_graph(world, what):
    """``gpu/01``: the block catches the error and goes on; the capture still ends without a
    graph, and the device graph is destroyed."""
    rt, fake = world.rt, world.fake
    wrong = rt.empty("float32", (65,))
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            with pytest.raises(tf.TenferroError):
                if what == "a refused upload":
                    rt.upload([1.0, 2.0])
                else:
                    ex.run(ADD, world.x, wrong)
            out = ex.run(ADD, world.x, world.y)
    with pytest.raises(tf.CaptureError, match="made no graph"):
        cap.graph(inputs=(world.x, world.y), outputs=(out,))
    assert "cuGraphInstantiate" not in fake.names() and not fake.execs
    del out
    released(world)
    assert not fake.arena_live


def test_a_native_replay_is_a_guard_and_one_launch_in_python_calls(world):
    """No session per replay: the runtime's state is checked as an op replay checks it, the
    output is the newest queued block of its size class, cuGraphLaunch goes through the
    driver's entry point. The gate is the exact count, the stand-in driver's frames in it (13:
    cuCtxGetCurrent and cuGraphLaunch answered from C). Compiled, the replay is one Python
    call, ``replay`` itself: its core checks, allocates and launches; in pure Python it is 21
    more, and the dropped output's finalizer 2."""
    fake = world.fake
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    graph.replay(world.x, world.y)
    compiled = _compiled.CALL is not None
    assert (graph._core is not None) is compiled
    budget = 14.01 if compiled else 36.01
    assert calls_per_op(lambda: graph.replay(world.x, world.y)) <= budget
    fake.calls.clear()
    for _ in range(3):
        graph.replay(world.x, world.y)  # each output dropped: its block is the next one's
    names = fake.names()
    assert names.count("cuGraphLaunch") == 3 and "alloc" not in names
    assert "cuGraphExecKernelNodeSetParams" not in names  # the output's address did not move


def test_moved_pointers_are_rewritten_without_the_python_path(world, monkeypatch):
    """Only pointers moved (the declared scalars as captured): the compiled replay rewrites the
    moved nodes' words and updates them itself, one cuGraphExecKernelNodeSetParams per node
    with a moved pointer, and never calls the launcher's Python rewrite."""
    rt, fake = world.rt, world.fake
    cap, t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    rewrites: list[int] = []
    python = type(graph._launcher)._launch_with
    monkeypatch.setattr(
        type(graph._launcher), "_launch_with", lambda *a: rewrites.append(1) or python(*a)
    )
    a, b = rt.empty("float32", (64,)), rt.empty("float32", (64,))
    fake.calls.clear()
    got = graph.replay(a, b)  # every pointer moved: both nodes
    assert len(updates(fake)) == 2
    ((first, second),) = (list(words.values()) for words in launched(fake))
    assert first[:3] == [t.storage.ptr, a.storage.ptr, b.storage.ptr]
    assert second[:3] == [got.storage.ptr, t.storage.ptr, b.storage.ptr]
    fake.calls.clear()
    c = rt.empty("float32", (64,))
    kept = graph.replay(a, c)  # y moved (both nodes read it); the output kept, the next moves
    assert len(updates(fake)) == 2 and len(launched(fake)) == 1
    fake.calls.clear()
    again = graph.replay(c, b)  # x moved (the first node), y moved (both), a fresh output
    ((node_words),) = (list(words.values()) for words in launched(fake))
    assert node_words[0][:3] == [t.storage.ptr, c.storage.ptr, b.storage.ptr]
    assert node_words[1][:3] == [again.storage.ptr, t.storage.ptr, b.storage.ptr]
    assert kept.storage.ptr != again.storage.ptr
    assert rewrites == ([] if graph._core is not None else [1, 1, 1])


def test_a_thread_without_a_context_replays_under_the_runtimes_and_is_left_without(world):
    rt, fake = world.rt, world.fake
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    graph.replay(world.x, world.y)
    fake.thread_context = 0
    fake.calls.clear()
    graph.replay(world.x, world.y)
    names = fake.names()
    switches = [a for n, a in fake.calls if n == "cuCtxSetCurrent"]
    assert switches == [rt.primary._handle, 0] and fake.cuCtxGetCurrent()[1] == 0
    assert names.count("cuGraphLaunch") == 1
    if graph._core is not None:  # in C: no second cuCtxGetCurrent (the Python switch's)
        assert names == ["cuCtxGetCurrent", "cuCtxSetCurrent", "cuGraphLaunch", "cuCtxSetCurrent"]


def test_a_replay_on_a_closed_runtime_or_inside_a_session_is_the_sessions_typed_error(world):
    rt = world.rt
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    with rt.session(), pytest.raises(tf.RuntimeStateError, match="already open on this thread"):
        graph.replay(world.x, world.y)
    rt.closed = True
    try:
        with pytest.raises(tf.RuntimeStateError, match="was closed"):
            graph.replay(world.x, world.y)
    finally:
        rt.closed = False
    graph.replay(world.x, world.y)


def test_a_fill_the_capture_did_not_see_made_keeps_the_replayed_form(world):
    """A memset the runtime's zeros did not make (a variant calling the driver itself) cannot
    be told a constant's from an op call's: the graph is not followed."""
    rt, fake = world.rt, world.fake
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(ADD, world.x, world.y)
            fake.cuMemsetD8Async(out.storage.ptr, 0, 256, rt._stream)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    assert graph.form == "replayed"
    assert "not the fills the capture made" in (graph.why_replayed or "")


def test_the_compiled_replay_hands_over_to_the_python_one_where_it_must(world):
    """The compiled replay runs on the capturing thread with the launcher's nodes free. From
    another thread the Python replay runs (and launches the same words); while another replay
    holds the nodes (the launcher's lock) the core answers FALLBACK before it allocates."""
    fake = world.fake
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(world.x, world.y), outputs=(out,))
    graph.replay(world.x, world.y)
    fake.calls.clear()
    mine = graph.replay(world.x, world.y)
    del mine  # its block is the next output's, on either thread
    made: list[Any] = []
    worker = threading.Thread(target=lambda: made.append(graph.replay(world.x, world.y)))
    worker.start()
    worker.join()
    first, second = launched(fake)
    assert first == second and made[0].shape == (64,)
    if graph._core is None:  # the pure-Python call (TENFERRO_COMPILED_CALL=0): no core
        assert _compiled.CALL is None
        return
    blocks = len(world.rt.deferred)
    with graph._launcher._lock:
        assert graph._core((world.x, world.y)) is _compiled.FALLBACK
    assert len(world.rt.deferred) == blocks  # nothing was allocated
    assert type(graph._core((world.x, world.y))) is tf.Tensor

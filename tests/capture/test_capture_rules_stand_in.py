"""Every rule of docs/capture.md on CUDA, in both of its forms, without a GPU (the recording
stand-in driver): what a capture refuses (raised, or caught by the block: either way no
graph), what ``cap.graph()`` refuses, what a replay checks before it runs anything. The same
rules on the CPU and WebGPU: tests/capture/test_replayed_capture.py."""

from __future__ import annotations

import types
from contextlib import nullcontext
from typing import Any

import numpy as np
import pytest
from support.capture_support import (
    REFUSALS,
    capture_copy_then_add,
    capture_two_adds,
    refused_capture,
)
from support.driver_stand_in import ADD, stand_in, stand_in_runtime

import tenferro_host as tf


@pytest.fixture(params=["native", "replayed"])
def world(request, monkeypatch) -> Any:
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", request.param)
    with stand_in() as w:
        x, y = w.rt.empty("float32", (64,)), w.rt.empty("float32", (64,))
        w.host.run(ADD, x, y)  # the warm-up
        yield types.SimpleNamespace(host=w.host, rt=w.rt, x=x, y=y, form=request.param)


REFUSED = [*REFUSALS, ("direct launch", lambda ex, x: ex.raw("direct"), r"ex\.raw")]


@pytest.mark.parametrize("caught", [False, True], ids=["raised", "caught"])
@pytest.mark.parametrize("block, what", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_what_a_capture_cannot_hold_is_refused_and_leaves_no_graph(world, block, what, caught):
    rt, x = world.rt, world.x
    refused_capture(rt, lambda ex: ex.run(ADD, x, world.y), lambda ex: block(ex, x), what, caught)
    assert "allocate_bytes" not in vars(rt)  # the runtime's own allocator again
    assert world.host.run(ADD, x, world.y).shape == (64,)  # the runtime works on


def test_graph_refuses_what_is_not_a_borrowed_input_or_a_returned_output(world):
    cap, t, out = capture_two_adds(world, ADD)
    x, y = world.x, world.y
    with pytest.raises(tf.ValidationError, match=r"inputs\[0\] is not a tensor the capture"):
        cap.graph(inputs=(t,))
    with pytest.raises(tf.ValidationError, match=r"inputs\[1\] is the tensor inputs\[0\]"):
        cap.graph(inputs=(x, x))
    with pytest.raises(tf.ValidationError, match=r"outputs\[0\] is not a tensor a captured"):
        cap.graph(inputs=(x, y), outputs=(x,))
    graph = cap.graph(inputs=(x, y), outputs=(out,))
    assert graph.form == world.form, graph.why_replayed


def test_a_replay_checks_its_tensors_and_scalars_before_it_runs(world):
    rt, x, y = world.rt, world.x, world.y
    cap, _t, out = capture_two_adds(world, ADD)
    graph = cap.graph(inputs=(x, y), outputs=(out,))
    other = stand_in_runtime(world.host)
    cases = [
        ((x,), tf.ValidationError, "takes 2 tensors"),
        ((np.ones(64, np.float32), y), tf.ValidationError, "not a Tensor"),
        ((rt.empty("float32", (65,)), y), tf.ValidationError, r"shape \(65,\)"),
        ((rt.empty("int32", (64,)), y), tf.ValidationError, "dtype int32"),
        ((rt.empty("float32", (128,))[::2], y), tf.ValidationError, r"strides \(2,\)"),
        ((other.empty("float32", (64,)), y), tf.ForeignRuntimeError, "move it there"),
        ((x, x), tf.AliasingError, "overlap in memory, unlike at capture"),
    ]
    for tensors, error, message in cases:
        with pytest.raises(error, match=message):
            graph.replay(*tensors)
    with pytest.raises(tf.ValidationError, match="no scalars"):
        graph.replay(x, y, k=1.0)
    assert graph.replays == 0  # nothing ran
    graph.replay(x, y)
    graph.close()
    with pytest.raises(tf.CaptureError, match="closed"):
        graph.replay(x, y)


def test_a_same_device_copy_into_the_captured_runtime_is_a_constant_in_both_forms(world):
    """Into the captured runtime, a same-device copy is a constant of the graph in both forms:
    made once, when called. Natively it is made on the source's stream (never a node of the
    graph), and the captured stream waits for it when the capture ends, before the graph's
    first launch; replays copy nothing."""
    rt, x = world.rt, world.x
    fake = rt.driver
    other = stand_in_runtime(world.host)
    outside = other.empty("float32", (64,))
    fake.calls.clear()
    _cap, copy, graph, _out = capture_copy_then_add(rt, other, outside, x, ADD)
    assert graph.form == world.form, graph.why_replayed
    assert copy.backend is rt and copy.shape == (64,)
    copies = [a for n, a in fake.calls if n == "cuMemcpyAsync"]
    assert [(dst, src) for dst, src, _, _ in copies] == [(copy.storage.ptr, outside.storage.ptr)]
    if world.form == "native":
        assert copies[0][3] == other._stream != rt._stream  # made on the source's stream
        order = [
            n if n != "cuStreamWaitEvent" else (n, a[0])
            for n, a in fake.calls
            if n in ("cuStreamEndCapture", "cuStreamWaitEvent", "cuGraphLaunch")
        ]
        ended = order.index("cuStreamEndCapture")
        assert order[ended + 1 : ended + 3] == [("cuStreamWaitEvent", rt._stream), "cuGraphLaunch"]
    fake.calls.clear()
    graph.replay(world.y)
    assert "cuMemcpyAsync" not in fake.names()


def test_a_copy_out_of_the_native_captured_runtime_is_refused(world):
    """Out of a runtime whose stream is captured into a CUDA graph, what the block made has not
    run: the native form refuses the copy (the replayed form copies once, a constant)."""
    rt, x = world.rt, world.x
    other = stand_in_runtime(world.host)
    with rt.session() as s, other.session() as so:
        ex = s.exec_session()
        refused = pytest.raises(tf.CaptureError, match=r"copy out of the captured runtime")
        with nullcontext() if world.form == "replayed" else refused as info, ex.capture() as cap:
            copy = tf.cuda.copy_from_same_device(s, so, x)
            out = ex.run(ADD, x, world.y)
    if world.form == "native":
        assert "TENFERRO_CUDA_GRAPHS=replayed" in info.value.fix
        return
    assert copy.backend is other
    assert cap.graph(inputs=(x, world.y), outputs=(out,)).form == "replayed"


def test_a_copy_an_op_call_makes_keeps_the_replayed_form(world, monkeypatch):
    """A copy made inside an op call (a variant's own) is made once; a native replay repeats
    only the graph's nodes, so such a graph keeps the replayed form and says why."""
    rt, x = world.rt, world.x
    other = stand_in_runtime(world.host)
    outside = other.empty("float32", (64,))
    with rt.session() as s, other.session() as so:
        ex = s.exec_session()
        with ex.capture() as cap:
            capture = rt.active_capture
            with monkeypatch.context() as inside:  # as a variant's copy is: in the op call
                inside.setattr(type(capture), "in_op_call", property(lambda self: True))
                copy = tf.cuda.copy_from_same_device(so, s, outside)
            out = ex.run(ADD, x, copy)
    graph = cap.graph(inputs=(x,), outputs=(out,))
    assert graph.form == "replayed"
    if world.form == "native":
        assert "an op call copies between runtimes" in graph.why_replayed

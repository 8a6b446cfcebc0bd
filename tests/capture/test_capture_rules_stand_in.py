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
from support.capture_support import REFUSALS, capture_two_adds, refused_capture
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


def test_a_copy_between_runtimes_is_refused_in_the_native_form_only(world):
    """A same-device copy orders two streams by events and retires behind one: inside a CUDA
    graph the wait would cross the capture. The native form refuses it (into or out of the
    captured runtime), naming the replayed form; the replayed form copies once (a constant)."""
    rt, x, y = world.rt, world.x, world.y
    other = stand_in_runtime(world.host)
    outside = other.empty("float32", (64,))
    for into in (True, False):
        with rt.session() as s, other.session() as so:
            ex = s.exec_session()
            refused = pytest.raises(tf.CaptureError, match=r"copy between runtimes")
            with (
                nullcontext() if world.form == "replayed" else refused as info,
                ex.capture() as cap,
            ):
                copy = tf.cuda.copy_from_same_device(*((so, s, outside) if into else (s, so, x)))
                out = ex.run(ADD, x, y)
        if world.form == "native":
            assert "TENFERRO_CUDA_GRAPHS=replayed" in info.value.fix
            continue
        assert copy.backend is (rt if into else other)
        assert cap.graph(inputs=(x, y), outputs=(out,)).form == "replayed"

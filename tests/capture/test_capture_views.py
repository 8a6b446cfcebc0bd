"""Views inside a capture, on every backend's replayed form: a view of an earlier node's output
is that replay's output viewed, never a constant of the graph (``fuzz/02``); a view of an input
follows the input; a view may be an output; a tensor in an output's memory outside its elements
is refused. (The native CUDA form: tests/capture/test_native_graph_stand_in.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.op_registration import register_op

import tenferro_host as tf

ADD = "ext_add_kernel.add"
HALF = "capture_views.first_half"


def _first_half(ex: Any, x: tf.Tensor) -> tf.Tensor:
    """An op whose output views half of the buffer it made (its memory is larger)."""
    return ex.run(ADD, x, x)[: x.shape[0] // 2]


def up(rt: Any, values: Any) -> tf.Tensor:
    return rt.upload(np.asarray(values, np.float32))


def captured(rt: Any, body: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The capture of ``body(ex)`` on ``rt`` and what the body returned."""
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            made = body(ex)
    return cap, made


def replays_equal_eager(graph: Any, eager: Callable[..., Any], *inputs: tf.Tensor) -> None:
    """Four replays (the graph's plan learns on the first ones) each equal the eager calls."""
    for n in range(4):
        moved = [x.storage.runtime.upload(x.download() + 10 * n) for x in inputs]
        got = graph.replay(*moved)
        want = eager(*moved)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want, strict=True):
            np.testing.assert_array_equal(g.download(), w.download())


def test_a_view_of_an_intermediate_is_this_replays_output_viewed(host, each_rt):
    rt = each_rt
    a, b = up(rt, np.arange(8)), up(rt, np.full(8, 2))
    host.run(ADD, host.run(ADD, a, b)[1::2], b[::2])  # the warm-up of both layouts

    def body(ex: Any) -> Any:
        t = ex.run(ADD, a, b)
        return ex.run(ADD, t[:], b), ex.run(ADD, t[1::2], b[::2])

    cap, (whole, odd) = captured(rt, body)
    graph = cap.graph(inputs=(a, b), outputs=(whole, odd))

    def eager(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, ...]:
        t = host.run(ADD, x, y)
        return host.run(ADD, t[:], y), host.run(ADD, t[1::2], y[::2])

    replays_equal_eager(graph, eager, a, b)


def test_a_view_of_an_intermediate_may_be_an_output(host, each_rt):
    rt = each_rt
    a, b = up(rt, np.arange(8)), up(rt, np.ones(8))
    host.run(ADD, a, b)

    def body(ex: Any) -> Any:
        return ex.run(ADD, a, b)[2:6]

    cap, middle = captured(rt, body)
    graph = cap.graph(inputs=(a, b), outputs=(middle,))
    replays_equal_eager(graph, lambda x, y: (host.run(ADD, x, y)[2:6],), a, b)


def test_a_view_of_an_input_follows_the_input(host, each_rt):
    """``a[4:]`` read beside ``a``: a replay reads the new input's elements, not the capture's
    (it used to be a constant of the graph, which the aliasing check then refused)."""
    rt = each_rt
    a, b = up(rt, np.arange(8)), up(rt, np.full(8, 3))
    host.run(ADD, a[4:], b[4:])

    def body(ex: Any) -> Any:
        return ex.run(ADD, a, b), ex.run(ADD, a[4:], b[4:])

    cap, (whole, tail) = captured(rt, body)
    graph = cap.graph(inputs=(a, b), outputs=(whole, tail))

    def eager(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, ...]:
        return host.run(ADD, x, y), host.run(ADD, x[4:], y[4:])

    replays_equal_eager(graph, eager, a, b)
    big = up(rt, np.arange(24))  # inputs that are views themselves: the view is of them
    got = graph.replay(big[8:16], big[16:24])[1].download()
    np.testing.assert_array_equal(got, np.arange(12, 16) + np.arange(20, 24))


def test_a_view_of_a_tensor_that_is_not_an_input_stays_a_constant(host, each_rt):
    rt = each_rt
    a, b = up(rt, np.arange(8)), up(rt, np.full(8, 5))
    a_tail, b_tail = a[4:], b[4:]
    host.run(ADD, a_tail, b_tail)
    cap, tail = captured(rt, lambda ex: ex.run(ADD, a_tail, b_tail))
    graph = cap.graph(inputs=(a_tail,), outputs=(tail,))  # b_tail is a constant
    x = up(rt, np.arange(4) * 7)
    np.testing.assert_array_equal(graph.replay(x).download(), np.arange(4) * 7 + 5)


def test_a_tensor_in_an_outputs_memory_outside_its_elements_is_refused(host, each_rt):
    rt = each_rt
    register_op(
        host,
        "capture-views",
        tf.OpSpec(
            name=HALF,
            signature=tf.Signature(inputs=("x",), shape_rule=lambda x: (x[0] // 2,)),
            reference=lambda x: (x + x)[: len(x) // 2],
            variants={"dsl": _first_half},
        ),
    )
    a = up(rt, np.arange(8))
    host.run(ADD, host.run(HALF, a), a[:4])

    def body(ex: Any) -> Any:
        half = ex.run(HALF, a)  # elements 0..3 of an 8-element buffer
        beyond = tf.Tensor(half.storage, half.dtype, (4,), (1,), 4)
        return ex.run(ADD, beyond, half)

    with pytest.raises(tf.CaptureError, match="outside its elements") as info:
        captured(rt, body)
    assert "view of it" in info.value.fix

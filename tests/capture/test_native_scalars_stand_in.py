"""Declared scalars in the native CUDA graph, without a GPU (the recording stand-in driver): the
capture's calls are captured again with other values (probes, never launched) to find the
kernel parameters that hold each scalar; a replay with a new value rewrites them with
``cuGraphExecKernelNodeSetParams``. A scalar that reaches a kernel derived, or that changes which
kernels run, keeps the replayed form and says why."""

from __future__ import annotations

import gc
import struct
import types
from collections.abc import Callable
from typing import Any

import pytest
from support.driver_stand_in import stand_in, stand_in_module

import tenferro_host as tf
from tenferro_host.cuda import raw

SCALE = "native_scalars.scale_add"  # out = x + a * y: the attribute passed as it is
TWICE = "native_scalars.twice"  # passes 2 * a
BRANCH = "native_scalars.branch"  # a == 0 launches another kernel
COUNT = "native_scalars.count"  # an int attribute, passed as an i32
POSITIVE = "native_scalars.positive"  # refuses a negative a


def _variant(
    name: str, value: Callable[[Any], Any], kernel: Callable[[Any], str] = lambda a: "k"
) -> Callable[..., Any]:
    def variant(ex: Any, x: tf.Tensor, y: tf.Tensor, a: Any = 1.0) -> tf.Tensor:
        if name == POSITIVE and a < 0:
            raise tf.ValidationError(f"a must not be negative, got {a}", argument="a")
        with ex.raw(name) as rs:
            module = rs.resource(
                ("native-scalars", "module"), lambda: stand_in_module(ex.runtime, (8, 8, 8, 4))
            )
            out = rs.alloc_output(x.dtype, x.shape)
            rs.launch(
                module.function(kernel(a)),
                raw.LaunchConfig.flat(x.numel, 64),
                [rs.tensor_mut(out), rs.tensor(x), rs.tensor(y), value(a)],
            )
        return out

    return variant


OPS = {
    SCALE: (float, _variant(SCALE, raw.f32)),
    TWICE: (float, _variant(TWICE, lambda a: raw.f32(2 * a))),
    BRANCH: (float, _variant(BRANCH, raw.f32, lambda a: "zero" if a == 0 else "k")),
    COUNT: (int, _variant(COUNT, raw.i32)),
    POSITIVE: (float, _variant(POSITIVE, raw.f32)),
}


@pytest.fixture
def world(monkeypatch) -> Any:
    monkeypatch.delenv("TENFERRO_CUDA_GRAPHS", raising=False)
    with stand_in() as w:
        view = w.host.registry.staging("native-scalars")
        for name, (kind, variant) in OPS.items():
            view.add_op(
                tf.OpSpec(
                    name=name,
                    signature=tf.Signature(inputs=("x", "y"), attributes={"a": kind}),
                    reference=lambda x, y, a=1: x + a * y,
                    variants={"cuda-raw": variant},
                )
            )
        view.commit()
        x, y = w.rt.empty("float32", (64,)), w.rt.empty("float32", (64,))
        for name, (kind, _) in OPS.items():
            w.host.run(name, x, y, a=kind(2))  # the warm-up: the module is loaded
            w.host.run(BRANCH, x, y, a=0.0)
        yield types.SimpleNamespace(host=w.host, rt=w.rt, fake=w.fake, x=x, y=y)


def captured(w: Any, op: str, value: Any) -> tuple[Any, Any]:
    """``op(x, y, a=k)`` captured with ``k`` declared as ``value``: (the graph, its output)."""
    with w.rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            k = cap.scalar("k", value)
            out = ex.run(op, w.x, w.y, a=k)
    return cap.graph(inputs=(w.x, w.y), outputs=(out,)), out


def updates(fake: Any) -> list[list[int]]:
    return [arg[1] for name, arg in fake.calls if name == "cuGraphExecKernelNodeSetParams"]


def launched(fake: Any) -> list[list[int]]:
    return [next(iter(arg.values())) for name, arg in fake.calls if name == "cuGraphLaunch"]


def f32(value: float) -> int:
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    return int(bits)


def test_a_replay_with_a_new_scalar_rewrites_the_parameter_that_holds_it(world):
    fake = world.fake
    graph, _ = captured(world, SCALE, 2.0)
    assert graph.form == "native", graph.why_replayed
    fake.calls.clear()
    graph.replay(world.x, world.y, k=3.0)
    (words,) = updates(fake)
    assert words[3] & 0xFFFFFFFF == f32(3.0)
    assert launched(fake)[-1][3] & 0xFFFFFFFF == f32(3.0)
    fake.calls.clear()
    graph.replay(world.x, world.y, k=3.0)  # the same value: nothing to rewrite
    assert not updates(fake) and launched(fake)
    graph.replay(world.x, world.y)  # no value given: the declared one again
    assert launched(fake)[-1][3] & 0xFFFFFFFF == f32(2.0)
    fake.calls.clear()
    graph.replay(world.x, world.y, k=-0.0)  # -0.0 is not 0.0: its own bits
    graph.replay(world.x, world.y, k=0.0)
    assert [w[3] & 0xFFFFFFFF for w in launched(fake)] == [f32(-0.0), f32(0.0)]


def test_an_int_scalar_is_written_as_its_kernel_parameter_and_one_that_does_not_fit_is_refused(
    world,
):
    fake = world.fake
    graph, _ = captured(world, COUNT, 5)
    assert graph.form == "native", graph.why_replayed
    graph.replay(world.x, world.y, k=9)
    assert launched(fake)[-1][3] & 0xFFFFFFFF == 9
    with pytest.raises(tf.ValidationError, match="'k' = 1099511627776 does not fit") as info:
        graph.replay(world.x, world.y, k=2**40)
    assert info.value.argument == "k"
    fake.calls.clear()
    graph.replay(world.x, world.y, k=-4)  # the refused value left nothing half written
    assert launched(fake)[-1][3] & 0xFFFFFFFF == (-4) & 0xFFFFFFFF


@pytest.mark.parametrize(
    "op, why",
    [
        (TWICE, "as something other than its own value"),
        (BRANCH, "changes which kernels the graph runs"),
        (POSITIVE, "probing the declared scalars: ValidationError: a must not be negative"),
    ],
    ids=["derived", "branch", "probe refused"],
)
def test_a_scalar_the_native_graph_cannot_follow_keeps_the_replayed_form(world, op, why):
    graph, _ = captured(world, op, 2.0)
    assert graph.form == "replayed"
    assert why in (graph.why_replayed or "")


def test_probes_are_never_launched_and_their_memory_is_freed(world):
    fake, rt = world.fake, world.rt
    fake.calls.clear()
    graph, out = captured(world, SCALE, 2.0)
    names = fake.names()
    assert names.count("cuStreamBeginCapture") == 4  # the capture, then three probes of k
    assert names.count("cuGraphInstantiate") == 1 and names.count("cuGraphLaunch") == 1
    assert names.count("cuGraphDestroy") == 3  # each probe's graph
    kept = set(graph._launcher.arena.blocks)
    gc.collect()
    for _ in range(3):
        rt.drain_deferred()
        rt.retirement.poll()
    assert set(fake.arena_live) == kept  # the probes' arenas went; the graph's stays
    del out

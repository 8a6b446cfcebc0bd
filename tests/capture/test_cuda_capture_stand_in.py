"""``ex.capture()`` on CUDA without a GPU (the recording driver stand-in and cuda.core's launch
recorded): the CUDA-only invariants (module loads and NVRTC compiles, debug-sync mode, planned
calls from another thread, a raw session outside an op) are typed errors."""

from __future__ import annotations

from typing import Any

import pytest
from support.capture_support import while_capturing
from support.driver_stand_in import ADD, stand_in
from support.op_registration import register_ops

import tenferro_host as tf
from tenferro_host.provider import _op_plan

LOADS = "capture_cuda.loads"
RAW_COMPILE = "capture_cuda.compiles"
PTX = b".version 8.0\n.target sm_90\n.address_size 64\n"


def _loads(ex: Any, x: tf.Tensor) -> tf.Tensor:
    with ex.raw(LOADS) as rs:
        rs.load_ptx(PTX)
    return x


def _compiles(ex: Any, x: tf.Tensor) -> tf.Tensor:
    with ex.raw(RAW_COMPILE) as rs:
        rs.compile_nvrtc('extern "C" __global__ void k() {}')
    return x


@pytest.fixture(scope="module")
def world() -> Any:
    with stand_in() as world:
        register_ops(
            world.host, "capture-cuda-tests", "cuda-raw", {LOADS: _loads, RAW_COMPILE: _compiles}
        )
        yield world


def test_debug_sync_mode_refuses_a_capture(world):
    rt = world.rt
    rt.debug_sync = True
    try:
        with rt.session() as s, pytest.raises(tf.CaptureError, match="debug-sync mode"):
            s.exec_session().capture().__enter__()
    finally:
        rt.debug_sync = False
    assert rt.active_capture is None


@pytest.mark.parametrize(
    "op, what", [(LOADS, "loading a ptx module"), (RAW_COMPILE, "an NVRTC compile")]
)
def test_a_module_load_or_compile_inside_a_capture_names_the_op_and_its_warm_up(world, op, what):
    rt = world.rt
    fake = world.fake
    x = rt.empty("float32", (8,))
    fake.calls.clear()
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match=what) as info, ex.capture():
            ex.run(op, x)
    assert info.value.op == op and "warm-up" in str(info.value)
    assert not [n for n in fake.names() if n.startswith("cuLibrary")]


def test_a_raw_session_opened_directly_in_a_capture_is_refused(world):
    rt = world.rt
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match=r"ex\.raw"), ex.capture():
            ex.raw("direct")


def test_a_planned_call_from_another_thread_is_refused_not_launched(world, monkeypatch):
    host = world.host
    rt = world.rt
    fake = world.fake
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    x = rt.empty("float32", (32,))
    for _ in range(3):
        host.run(ADD, x, x)
    assert "replay" in host.op(ADD).plans().values()

    def body(ex: Any) -> None:
        ex.run(ADD, x, x)
        fake.calls.clear()

    cap, seen = while_capturing(rt, body, lambda: host.run(ADD, x, x))
    assert "cuLaunchKernel" not in fake.names()
    assert isinstance(seen[0], tf.CaptureError) and "locked" in str(seen[0])
    assert cap.graph(inputs=(x,)).ops == (ADD,)


def test_an_export_inside_a_cuda_capture_is_refused(world):
    rt = world.rt
    x = rt.empty("float32", (8,))
    with rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match="DLPack export"), ex.capture():
            x.__dlpack__(stream=None)
    assert rt.active_capture is None

"""The linalg package's CUDA variants in a capture, without a GPU (the recording stand-in
driver). They run CuPy on the raw session's stream, and CuPy refuses cuBLAS and cuSOLVER calls
during a stream capture (``NotImplementedError``, seen on the H100); a temporary from CuPy's
pool would also be baked into a device graph at an address the pool hands out again. So the
native form refuses the op call first, typed and naming the replayed form, and ends the capture
without a graph; the replayed form reaches CuPy as an eager call does."""

from __future__ import annotations

import pytest
from support.driver_stand_in import ADD, stand_in
from tenferro_host_linalg import cupy_bridge

import tenferro_host as tf
from tenferro_host import OpSpec, Signature

STEP = "tests.cupy_step"


class CupyReachedError(Exception):
    """Raised where CuPy would be loaded (past the refusal): no CuPy runs on the stand-in."""


def reach_cupy(op, backend):
    raise CupyReachedError(op)


def cupy_step(ex, x):
    with ex.raw(STEP) as rs, cupy_bridge.on_session_stream(rs):
        raise AssertionError("unreachable: CuPy is not loaded")


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setattr(cupy_bridge, "require_cupy", reach_cupy)
    with stand_in() as w:
        view = w.host.registry.staging("tests")
        view.add_op(
            OpSpec(
                name=STEP,
                signature=Signature(inputs=("x",)),
                reference=lambda x: x,
                variants={"cuda-raw": cupy_step},
            )
        )
        view.commit()
        x = w.rt.empty("float32", (64,))
        w.host.run(ADD, x, x)  # the warm-up
        yield w, x


def test_cupy_on_the_session_stream_is_refused_in_a_native_graph(world, monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", "native")
    w, x = world
    with w.rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match="CuPy work on the session stream") as info:
            with ex.capture() as cap:
                ex.run(ADD, x, x)
                ex.run(STEP, x)
    assert info.value.op == STEP
    assert "TENFERRO_CUDA_GRAPHS=replayed" in info.value.fix
    with pytest.raises(tf.CaptureError, match="made no graph"):
        cap.graph()
    assert w.rt.active_capture is None


def test_the_replayed_form_reaches_cupy_as_an_eager_call_does(world, monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", "replayed")
    w, x = world
    with pytest.raises(CupyReachedError):
        w.host.run(STEP, x)
    with w.rt.session() as s:
        ex = s.exec_session()
        with pytest.raises(CupyReachedError), ex.capture():
            ex.run(STEP, x)

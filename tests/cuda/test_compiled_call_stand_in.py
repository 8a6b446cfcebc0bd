"""The compiled CUDA core (``DriverLaunchCore``) against the Python replay, without a GPU: the
stand-in driver answers ``cuGetProcAddress`` with C-callables that record what C hands them
(the parameter block as the driver reads it), so what the compiled call passes to the driver is
checked here. Both paths run in one process (``_op_handle.CALL`` None: the Python path)."""

from __future__ import annotations

from typing import Any

import pytest
from support.call_budget import call_trace
from support.driver_stand_in import ADD, launch_words, stand_in

import tenferro_host as tf
from tenferro_host import _op_handle
from tenferro_host.provider import _compiled, _op_plan

pytestmark = pytest.mark.skipif(
    _compiled.CALL is None, reason=f"the compiled call is off: {_compiled.STATE}"
)


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    with stand_in() as world:
        yield world


def _launched(fake: Any) -> list[tuple[Any, ...]]:
    return [
        (f, grid, block, shared, launch_words(views))
        for name, (f, grid, block, shared, views) in (
            c for c in fake.calls if c[0] == "cuLaunchKernel"
        )
    ]


def _run_both(setup: Any, monkeypatch: pytest.MonkeyPatch, body: Any) -> list[Any]:
    """``body(handle, rt)`` on the compiled call, then on the Python one (fresh handles)."""
    host, rt, fake, *_ = setup
    seen = []
    for call in (_compiled.CALL, None):
        monkeypatch.setattr(_op_handle, "CALL", call)
        host._handles.clear()
        fake.calls.clear()
        seen.append(body(host.op(ADD), rt))
    return seen


def test_the_compiled_core_launches_what_the_python_replay_launches(setup, monkeypatch):
    def body(add: Any, rt: Any) -> Any:
        a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
        kept = [add(a, b) for _ in range(6)]  # each output kept: a fresh block per call
        assert list(add.plans().values()) == ["replay"]  # (its core: DriverLaunchCore)
        launched = _launched(setup[2])  # (the stand-in reads a block as it is now: the last words)
        words = launched[-1][4]
        assert words[:3] == [kept[-1].storage.ptr, a.storage.ptr, b.storage.ptr]
        assert words[3] & 0xFFFFFFFF == 1024
        return [launch[:4] for launch in launched], len(launched)

    compiled, python = _run_both(setup, monkeypatch, body)
    assert compiled == python and compiled[1] >= 4  # planned after two recordings


def test_a_failed_launch_is_the_same_typed_error_on_both_paths(setup, monkeypatch):
    def body(add: Any, rt: Any) -> Any:
        a, b = rt.empty(tf.float32, (256,)), rt.empty(tf.float32, (256,))
        for _ in range(3):
            add(a, b)
        setup[2].launch_result = 1  # CUDA_ERROR_INVALID_VALUE
        try:
            with pytest.raises(tf.LaunchError) as caught:
                add(a, b)
        finally:
            setup[2].launch_result = 0
        return type(caught.value), str(caught.value)

    compiled, python = _run_both(setup, monkeypatch, body)
    assert compiled == python


def test_another_current_context_takes_the_python_replay(setup, monkeypatch):
    host, rt, fake, *_ = setup
    a, b = rt.empty(tf.float32, (64,)), rt.empty(tf.float32, (64,))
    add = host.op(ADD)
    for _ in range(3):
        add(a, b)
    # C asks the driver per call (the stand-in's method, looked up per call): another context
    # there; the Python replay's own check (the method bound when the replay was made) is the
    # one recorded, and it launches
    monkeypatch.setattr(type(fake), "cuCtxGetCurrent", lambda self: (0, 99))
    fake.calls.clear()
    out = add(a, b)
    assert fake.names() == ["cuCtxGetCurrent", "cuLaunchKernel"]
    assert _launched(fake)[-1][4][:3] == [out.storage.ptr, a.storage.ptr, b.storage.ptr]


def test_a_thread_without_a_context_gets_the_runtimes_around_the_launch_and_none_after(setup):
    """No context current (a process that touched CUDA only through the host, which restores
    "none" after each of its calls): the compiled call makes the runtime's context current for
    its launch and restores none, in C, instead of falling back to the Python replay (whose
    switch would be two more bindings calls and a second ``cuCtxGetCurrent``)."""
    host, rt, fake, *_ = setup
    a, b = rt.empty(tf.float32, (64,)), rt.empty(tf.float32, (64,))
    add = host.op(ADD)
    for _ in range(3):
        add(a, b)
    fake.thread_context = 0
    fake.calls.clear()
    out = add(a, b)
    assert fake.calls == [
        ("cuCtxGetCurrent", None),
        ("cuCtxSetCurrent", rt.primary._handle),
        *[c for c in fake.calls if c[0] == "cuLaunchKernel"],
        ("cuCtxSetCurrent", 0),
    ]
    assert _launched(fake)[-1][4][:3] == [out.storage.ptr, a.storage.ptr, b.storage.ptr]
    assert fake.cuCtxGetCurrent()[1] == 0  # the thread has no context again


def test_a_planned_cuda_call_costs_at_most_four_python_calls(setup):
    host, rt, *_ = setup
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    for _ in range(3):
        host.run(ADD, a, b)
    # host.run alone (the previous output's finalizer, whose block serves the next call, is C)
    calls = call_trace(lambda: host.run(ADD, a, b), __file__)[0]  # Python frames of one call
    assert sum(n for f, n in calls.items() if not f.endswith("driver_stand_in.py")) <= 4

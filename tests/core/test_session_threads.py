"""Which threads have a session of a runtime open (``Runtime._session_threads``, a token per
thread): the session's "already open on this thread" refusal and the op handle's replay guard
read the same set, so a session open on another thread neither refuses this thread's session
nor sends its planned calls to the full path, and a thread that died with a session open leaves
a token no later thread has (thread ids are reused; tokens are not). On every backend
(``each_rt``)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host._op_handle import OpHandle
from tenferro_host.provider import _op_plan

ADD = "ext_add_kernel.add"


def _in_thread(fn: Any) -> Any:
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(fn()))
    worker.start()
    worker.join()
    return box[0]


def test_a_session_on_another_thread_leaves_this_one_planned(
    each_rt: Any, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    full_path = [0]  # a replay (compiled or not) serves a call without the full path
    call_full = OpHandle._call_full

    def counted(self: OpHandle, *args: Any) -> Any:
        full_path[0] += 1
        return call_full(self, *args)

    monkeypatch.setattr(OpHandle, "_call_full", counted)
    rt, host = each_rt, each_rt.host
    a, b = rt.upload(np.ones(3, np.float32)), rt.upload(np.full(3, 2, np.float32))
    for _ in range(3):
        host.run(ADD, a, b)
    entered, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with rt.session():
            entered.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(10)
        full_path[0] = 0
        assert host.run(ADD, a, b).download().tolist() == [3.0, 3.0, 3.0]
        assert full_path[0] == 0  # replayed: the open session is another thread's
        with rt.session():  # and this thread may open its own
            with pytest.raises(tf.RuntimeStateError, match="already open on this thread"):
                host.run(ADD, a, b)  # but not call an op inside it (planned or not)
        assert full_path[0] == 1
    finally:
        leave.set()
        holder.join()
    assert not rt._session_threads


def test_a_thread_that_died_with_a_session_open_blocks_no_later_thread(each_rt: Any):
    rt = each_rt
    abandoned = _in_thread(lambda: rt.session().__enter__())  # never exited
    assert abandoned is not None and len(rt._session_threads) == 1

    def open_one() -> bool:
        with rt.session():
            return True

    assert all(_in_thread(open_one) for _ in range(20))  # ids are reused; tokens are not
    assert len(rt._session_threads) == 1  # only the dead thread's token is left

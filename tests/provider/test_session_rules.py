"""Sessions on every backend (``each_rt``): thread binding, invalidation of the session and its
handles (a JIT session's included), nesting, single use, what a backend without native modules
refuses."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import kernels

import tenferro_host as tf
from tenferro_host.provider import SessionHandle


def in_thread(fn: Callable[[], Any]) -> BaseException | None:
    """Run ``fn`` on another thread; return what it raised."""
    caught: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            caught.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    return caught[0] if caught else None


Cap = tf.ExtensionCapability


@pytest.fixture
def cpu(host):
    return host.backend("cpu")


def test_exec_session_is_bound_to_its_thread(each_rt):
    with each_rt.session() as s:
        ex = s.exec_session()
        for use in (
            lambda: ex.supports(tf.ExtensionCapability.JIT_KERNEL),
            ex.synchronize,
            s.exec_session,
            lambda: SessionHandle(ex)._check(),
        ):
            assert isinstance(in_thread(use), tf.WrongThreadError)
        assert ex.supports(tf.ExtensionCapability.JIT_KERNEL)  # still fine on its own thread


def test_session_created_on_one_thread_cannot_be_entered_on_another(each_rt):
    s = each_rt.session()
    err = in_thread(s.__enter__)
    assert isinstance(err, tf.WrongThreadError)
    assert "created on another thread" in str(err)
    with s:  # the creating thread still can
        pass


def test_session_cannot_end_on_another_thread(each_rt):
    s = each_rt.session()
    s.__enter__()
    err = in_thread(lambda: s.__exit__(None, None, None))
    assert isinstance(err, tf.WrongThreadError)
    s.__exit__(None, None, None)
    assert s.closed


def test_other_threads_open_their_own_sessions_of_the_same_runtime(each_rt):
    results: list[Any] = []
    a = each_rt.upload(np.ones(3, np.float32))
    with each_rt.session():
        err = in_thread(lambda: results.append(each_rt.host.run("ext_add_kernel.add", a, a)))
    assert err is None
    assert results[0].download().tolist() == [2.0, 2.0, 2.0]


def test_session_and_handles_are_invalid_after_exit(each_rt):
    with each_rt.session() as s:
        ex = s.exec_session()
        handle = SessionHandle(ex)
        handle._check()
    assert s.closed and ex.closed
    for use in (
        s.exec_session,
        ex.synchronize,
        handle._check,
        lambda: ex.supports(tf.ExtensionCapability.JIT_KERNEL),
        lambda: ex.run("ext_add_kernel.add"),
        lambda: ex.jit("my.op"),
    ):
        with pytest.raises(tf.SessionClosedError, match="has ended"):
            use()


def test_session_not_entered_yet(each_rt):
    s = each_rt.session()
    with pytest.raises(tf.SessionClosedError, match="not entered yet"):
        s.exec_session()


def test_sessions_are_single_use(each_rt):
    s = each_rt.session()
    with s:
        pass
    with pytest.raises(tf.RuntimeStateError, match="single-use"):
        s.__enter__()


def test_same_runtime_nesting_is_refused(host, each_rt):
    a = each_rt.zeros("float32", (2,))
    with each_rt.session():
        with pytest.raises(tf.RuntimeStateError, match="already open on this thread"):
            with each_rt.session():
                pass
        with pytest.raises(tf.RuntimeStateError, match=r"ex\.run"):
            host.run("ext_add_kernel.add", a, a)
    with each_rt.session():  # the refused attempts left nothing behind
        pass


def test_two_runtimes_nest_fine(host, each_backend, each_rt):
    other = host.new_backend(each_backend)
    with each_rt.session() as s1, other.session() as s2:
        assert s1.exec_session().runtime_identity != s2.exec_session().runtime_identity
        assert s1.exec_session().allocation_domain == each_rt.domain


@pytest.mark.parametrize("raised", [ValueError, KeyboardInterrupt])
def test_an_exception_in_the_body_still_closes_the_session(each_rt, raised):
    with pytest.raises(raised):
        with each_rt.session() as s:
            ex = s.exec_session()
            raise raised()
    assert s.closed and ex.closed
    with each_rt.session():  # the runtime is free again
        pass


def test_exec_session_facts_and_nested_op(cpu):
    a = cpu.upload(np.arange(4, dtype=np.float32))
    with cpu.session() as s:
        ex = tf.cpu.exec_session(s)
        assert tf.cuda.exec_session(s) is None and tf.webgpu.exec_session(s) is None
        assert ex.kind == "cpu" and ex.runtime_identity == cpu.identity
        assert ex.device_info.cores >= 1
        assert not ex.supports(tf.ExtensionCapability.NATIVE_MODULE)
        out = ex.run("ext_add_kernel.add", a, a)
    assert out.download().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_no_raw_session_and_no_foreign_streams_without_native_modules(each_rt):
    with each_rt.session() as s:
        ex = s.exec_session()
        assert not ex.supports(Cap.NATIVE_MODULE) and not ex.supports(Cap.RAW_STREAM)
        with pytest.raises(tf.UnsupportedError, match="no raw native-module session") as info:
            ex.raw("my.op")
        assert info.value.feature == "NATIVE_MODULE" and info.value.op == "my.op"
        with pytest.raises(tf.UnsupportedError) as info:
            ex.wait_external(object())
        assert info.value.feature == "RAW_STREAM"
        with pytest.raises(tf.UnsupportedError):
            ex.signal_external(object())


def test_exec_session_of_needs_a_backend_session(each_rt):
    with each_rt.session() as s:
        for facade in (tf.cpu, tf.cuda, tf.webgpu):
            with pytest.raises(tf.ValidationError, match="expected a backend session"):
                facade.exec_session(s.exec_session())


def test_observers_are_not_called_when_no_plugin_implements_them(host, each_rt, monkeypatch):
    plugins = host.plugins
    assert not plugins.observe_started and not plugins.observe_finished
    called: list[str] = []
    monkeypatch.setattr(
        plugins.pm.hook, "tenferro_host_session_started", lambda **kw: called.append("started")
    )
    monkeypatch.setattr(
        plugins.pm.hook, "tenferro_host_session_finished", lambda **kw: called.append("finished")
    )
    with each_rt.session():
        pass
    assert called == []


# -- a JIT session's handles -------------------------------------------------------------------


def test_jit_handles_are_invalid_after_the_session(each_rt):
    x = each_rt.upload(np.ones(4, np.float32))
    with each_rt.session() as s:
        ex = s.exec_session()
        with ex.jit("tests.closed") as js:
            b = js.binding(x)
            assert b.tensor is x
    with pytest.raises(tf.SessionClosedError):
        b.tensor  # noqa: B018
    with pytest.raises(tf.SessionClosedError):
        js.launch(kernels.add, 1, 4, x, x, x)
    with pytest.raises(tf.SessionClosedError):
        js.binding(x)
    with pytest.raises(tf.SessionClosedError):
        ex.jit("tests.again")


def test_a_jit_session_is_bound_to_its_thread(each_rt):
    x = each_rt.upload(np.ones(4, np.float32))
    with each_rt.session() as s, s.exec_session().jit("tests.thread") as js:
        b = js.binding(x)
        for use in (
            lambda: js.binding(x),
            lambda: js.launch(kernels.add, 1, 4, x, x, x),
            lambda: b.tensor,
        ):
            assert isinstance(in_thread(use), tf.WrongThreadError)


def test_another_runtime_of_the_same_kind_is_foreign(host, each_backend, each_rt):
    theirs = host.new_backend(each_backend).upload(np.ones(4, np.float32))
    mine = each_rt.upload(np.ones(4, np.float32))
    with each_rt.session() as s, s.exec_session().jit("tests.foreign") as js:
        with pytest.raises(tf.ForeignRuntimeError):
            js.binding(theirs)
        with pytest.raises(tf.ForeignRuntimeError):
            js.launch(kernels.add, 1, 4, mine, theirs, mine)

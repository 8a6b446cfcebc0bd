"""Captures for the capture tests: one held open while another thread tries the runtime, one a
refusal ends (the refusals every backend shares), and the chains the tests capture."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import pytest

import tenferro_host as tf


def while_capturing(
    rt: Any, body: Callable[[Any], Any], *others: Callable[[], Any]
) -> tuple[Any, list[Any]]:
    """Capture ``body(ex)`` on ``rt``; while the capture is open, run each of ``others`` on
    another thread. Returns the capture and what each other call returned or raised."""
    seen: list[Any] = []
    ready, done = threading.Event(), threading.Event()

    def other() -> None:
        ready.wait()
        for call in others:
            try:
                seen.append(call())
            except tf.TenferroError as exc:
                seen.append(exc)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    try:
        with rt.session() as s:
            ex = s.exec_session()
            with ex.capture() as cap:
                body(ex)
                ready.set()
                done.wait()
    finally:
        ready.set()
        thread.join()
    return cap, seen


def capture_two_adds(w: Any, op: str) -> tuple[Any, Any, Any]:
    """``(x + y) + y`` of the add ``op`` captured on ``w.rt`` (``w``: its host, rt, x and y; the
    second call ``host.run``, routed into the capture): the capture, its intermediate, its
    output."""
    with w.rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = ex.run(op, w.x, w.y)
            out = w.host.run(op, t, w.y)  # routed into the capture
    return cap, t, out


def capture_copy_then_add(rt: Any, other: Any, source: Any, x: Any, op: str) -> tuple[Any, ...]:
    """``x + copy`` of ``op`` captured on ``rt``, ``copy`` made in the block by
    ``copy_from_same_device`` of ``source`` (of runtime ``other``): the capture, the copy and
    the graph of input ``x`` and output the sum."""
    with rt.session() as s, other.session() as so:
        ex = s.exec_session()
        with ex.capture() as cap:
            copy = tf.cuda.copy_from_same_device(so, s, source)
            out = ex.run(op, x, copy)
    return cap, copy, cap.graph(inputs=(x,), outputs=(out,)), out


#: What every backend's capture refuses (docs/capture.md's table): (id, the refused step of a
#: block given its exec session and a borrowed tensor, what the error says). A backend's own
#: (a direct DSL or raw session, an upload on CUDA) stand beside these in its tests.
REFUSALS: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("synchronize", lambda ex, x: ex.synchronize(), "a synchronization"),
    ("download", lambda ex, x: x.download(), "a download"),
    ("dlpack export", lambda ex, x: x.__dlpack__(stream=None), "a DLPack export"),
    ("drain", lambda ex, x: ex.runtime.retirement.drain(), "draining the retirement queue"),
    ("nested", lambda ex, x: ex.capture().__enter__(), "already being captured"),
]


def refused_capture(
    rt: Any, step: Callable[[Any], Any], refused: Callable[[Any], Any], what: str, caught: bool
) -> Any:
    """Capture ``step(ex)``, then ``refused(ex)``, which must raise CaptureError matching
    ``what``; ``caught``: the block catches it and makes ``step(ex)`` again. The capture,
    which has ended without a graph either way."""
    error = pytest.raises(tf.CaptureError, match=what)
    with rt.session() as s:
        ex = s.exec_session()
        with nullcontext() if caught else error, ex.capture() as cap:
            step(ex)
            if caught:
                with error:
                    refused(ex)
                step(ex)  # the block goes on as if nothing was refused
            else:
                refused(ex)
    assert rt.active_capture is None
    with pytest.raises(tf.CaptureError, match="made no graph"):
        cap.graph()
    return cap

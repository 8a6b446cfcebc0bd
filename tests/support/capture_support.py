"""Captures for the capture tests: one held open while another thread tries the runtime."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

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

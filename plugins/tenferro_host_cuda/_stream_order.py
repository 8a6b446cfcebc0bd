"""Ordering a runtime's stream against another stream (a framework's, an exec session's
``wait_external``/``signal_external``) with events only: no host wait.

Each direction is one ``cuEventRecord`` and one ``cuStreamWaitEvent`` on an event the runtime
owns, re-recorded per call (a wait takes the event's state when it is enqueued, so reusing it
never changes an earlier wait), through the driver's entry points with prebuilt arguments
(both in one C call where the compiled call is built, ``order_streams``): no event and no
Python object is made per call. A lock keeps another thread's record between a record and its
wait out. Inside a stream capture the same two calls fork the runtime's stream into the capture
and join it back, as the driver defines for captured events.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any

from tenferro_host.provider import order_streams

from ._driver import address, check, entry, failure

if TYPE_CHECKING:
    from ._runtime import CudaRuntime


class StreamOrder:
    """``after(s)``: the runtime's stream waits for the work already on stream ``s``;
    ``before(s)``: ``s`` waits for the work already on the runtime's stream (``s`` a
    ``CUstream`` handle as an int). The two events are made on first use, destroyed at
    :meth:`close`."""

    __slots__ = ("_c", "_counts", "_lock", "_made", "_own", "_record", "_runtime", "_wait")

    def __init__(self, runtime: CudaRuntime) -> None:
        self._runtime = runtime
        self._lock = threading.Lock()
        self._counts = runtime.counters.values  # "events_recorded", without a call
        #: the driver's two events (to destroy), or None before first use
        self._made: list[Any] | None = None
        #: (event "after", event "before", the runtime's stream) as C values
        self._own: tuple[Any, Any, Any] = (None, None, None)
        self._record: Any = None
        self._wait: Any = None
        #: (record's address, wait's address, event "after", event "before", the runtime's
        #: stream) as ints, for the compiled ordering (``order_streams``)
        self._c: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)

    def _open(self) -> tuple[Any, Any, Any]:
        rt = self._runtime
        d = rt.driver
        flags = d.CUevent_flags.CU_EVENT_DISABLE_TIMING
        with rt.primary:
            made = [check(d.cuEventCreate(flags), "cuEventCreate") for _ in range(2)]
        self._record, self._wait = entry("cuEventRecord", d), entry("cuStreamWaitEvent", d)
        self._made = made
        after, before = (ctypes.c_void_p(int(e)) for e in made)
        self._own = (after, before, ctypes.c_void_p(int(rt._stream)))
        ends = (address(self._record), address(self._wait))
        self._c = (*ends, int(made[0]), int(made[1]), int(rt._stream))
        return self._own

    def after(self, stream: int) -> None:
        """Order the runtime's stream after the work already on ``stream``."""
        with self._lock:
            event, _, own = self._own if self._made else self._open()
            if order_streams is not None:  # the two driver calls in one C call
                record, wait, after, _, mine = self._c
                err = order_streams(record, wait, after, mine, stream)
            else:
                err = self._record(event, ctypes.c_void_p(stream))
                if not err:
                    err = self._wait(own, event, 0)
            self._counts["events_recorded"] += 1
        if err:
            raise self._failed(err, f"after stream {stream:#x}")

    def before(self, stream: int) -> None:
        """Order ``stream`` after the work already on the runtime's stream."""
        with self._lock:
            _, event, own = self._own if self._made else self._open()
            if order_streams is not None:
                record, wait, _, before, mine = self._c
                err = order_streams(record, wait, before, stream, mine)
            else:
                err = self._record(event, own)
                if not err:
                    err = self._wait(ctypes.c_void_p(stream), event, 0)
            self._counts["events_recorded"] += 1
        if err:
            raise self._failed(err, f"before stream {stream:#x}")

    def _failed(self, err: int, where: str) -> Exception:
        rt = self._runtime
        return failure(err, f"ordering {rt.name!r}'s stream {where}", uuid=rt.uuid_bytes)

    def close(self) -> None:
        """Destroy the events (the runtime's close, after its stream is drained)."""
        made, self._made = self._made, None
        for event in made or ():
            self._runtime.driver.cuEventDestroy(event)


__all__ = ["StreamOrder"]

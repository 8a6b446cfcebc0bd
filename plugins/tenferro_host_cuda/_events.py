"""A runtime's events: recorded on its stream from a recycled pool, queried and waited for.

The retirement queue (``tenferro_host.provider``) holds leases behind these events; an event
comes back to the pool when its lease retires, so steady state creates none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._driver import NOT_READY

if TYPE_CHECKING:
    from ._runtime import CudaRuntime


class EventPool:
    """The events of ``runtime``: created once, recycled (destroyed at close)."""

    def __init__(self, runtime: CudaRuntime) -> None:
        self.runtime = runtime
        self.free: list[Any] = []

    def record(self) -> Any:
        """An event recorded on the runtime's stream now (the primary context current)."""
        rt = self.runtime
        d = rt.driver
        if self.free:
            event = self.free.pop()
        else:
            event = rt.ok(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        rt.ok(d.cuEventRecord(event, rt.stream_handle), "cuEventRecord")
        rt.counters.add("events_recorded")
        return event

    def recycle(self, event: Any) -> None:
        self.free.append(event)

    def done(self, event: Any) -> bool:
        """Whether the stream has passed ``event`` (a typed error if the query fails)."""
        result = self.runtime.driver.cuEventQuery(event)
        code = int(result[0])
        if code == 0:
            return True
        if code == NOT_READY:
            return False
        raise self.runtime.fail(result[0], "cuEventQuery")

    def wait(self, event: Any) -> None:
        self.runtime.ok(self.runtime.driver.cuEventSynchronize(event), "cuEventSynchronize")

    def destroy(self) -> None:
        """Destroy every pooled event (at close: none is in flight any more)."""
        for event in self.free:
            self.runtime.driver.cuEventDestroy(event)
        self.free.clear()


__all__ = ["EventPool"]

"""The CUDA exec session: the only creator of raw (and, through the registry, DSL) sessions."""

from __future__ import annotations

from threading import get_ident as _get_ident
from typing import TYPE_CHECKING, Any

from tenferro_host import ValidationError
from tenferro_host.provider import ExecSession

from ._driver import drv
from .raw import RawSession

if TYPE_CHECKING:
    from ._device import CudaDeviceInfo
    from ._runtime import CudaRuntime


def foreign_stream(stream: Any, op: str | None = None) -> Any:
    """The ``CUstream`` of an object implementing ``__cuda_stream__`` (the cuda.core protocol)."""
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is None:
        raise ValidationError(
            f"{type(stream).__name__} has no __cuda_stream__; pass a cuda.core Stream, a CuPy "
            "stream wrapped with cuda.core, or any object implementing the protocol",
            argument="stream",
            op=op,
        )
    _, handle = protocol()
    return drv().CUstream(int(handle))


class CudaExecSession(ExecSession):
    """``tf.cuda.exec_session(s)``: device info, identities, raw sessions, external ordering."""

    kind_name = "CUDA exec session"
    runtime: CudaRuntime

    @property
    def device_info(self) -> CudaDeviceInfo:
        """The device of this session's runtime."""
        return self.runtime.device_info

    def raw(self, op: str) -> RawSession:
        """A raw native-module session for the op ``op`` (docs/contract.md)."""
        if self._owner != _get_ident():
            self._check()
        capture = self.runtime._capture
        if capture is not None:
            capture.require_op_call("a raw session (ex.raw)", op)
        return RawSession(self, op)

    def wait_external(self, stream: Any) -> None:
        """Order this runtime's stream after the work already on ``stream`` (events only)."""
        self._check()
        d = drv()
        rt = self.runtime
        foreign = foreign_stream(stream)
        with rt.primary:
            event = rt.ok(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
            try:
                rt.ok(d.cuEventRecord(event, foreign), "cuEventRecord(foreign stream)")
                rt.counters.add("events_recorded")
                rt.stream_wait(event)
            finally:
                d.cuEventDestroy(event)

    def signal_external(self, stream: Any) -> None:
        """Order ``stream`` after the work already on this runtime's stream (events only)."""
        self._check()
        d = drv()
        rt = self.runtime
        foreign = foreign_stream(stream)
        event = rt.record_event()
        try:
            rt.ok(d.cuStreamWaitEvent(foreign, event, 0), "cuStreamWaitEvent(foreign stream)")
        finally:
            rt.recycle_event(event)


__all__ = ["CudaExecSession", "foreign_stream"]

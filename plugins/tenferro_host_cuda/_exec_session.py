"""The CUDA exec session: the only creator of raw (and, through the registry, DSL) sessions."""

from __future__ import annotations

from threading import get_ident as _get_ident
from typing import TYPE_CHECKING, Any

from tenferro_host import ValidationError
from tenferro_host.provider import ExecSession

from .raw import RawSession

if TYPE_CHECKING:
    from ._device import CudaDeviceInfo
    from ._runtime import CudaRuntime


def foreign_stream(stream: Any, op: str | None = None) -> int:
    """The ``CUstream`` handle of an object implementing ``__cuda_stream__`` (the cuda.core
    protocol)."""
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is None:
        raise ValidationError(
            f"{type(stream).__name__} has no __cuda_stream__; pass a cuda.core Stream, a CuPy "
            "stream wrapped with cuda.core, or any object implementing the protocol",
            argument="stream",
            op=op,
        )
    _, handle = protocol()
    return int(handle)


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
        capture = self.runtime.active_capture
        if capture is not None:
            capture.require_op_call("a raw session (ex.raw)", op)
        return RawSession(self, op)

    def wait_external(self, stream: Any) -> None:
        """Order this runtime's stream after the work already on ``stream`` (events only)."""
        self._check()
        self.runtime.streams.after(foreign_stream(stream))

    def signal_external(self, stream: Any) -> None:
        """Order ``stream`` after the work already on this runtime's stream (events only)."""
        self._check()
        self.runtime.streams.before(foreign_stream(stream))


__all__ = ["CudaExecSession", "foreign_stream"]

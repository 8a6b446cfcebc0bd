"""Explicit copies between runtimes (SPEC section 9): ``copy_from_same_device``.

Ordering uses events only: an event on the source stream, the destination stream waits on it,
the copy runs on the destination stream, and an event after it makes the source stream wait
too — so any later (stream-ordered) free of the source happens after the copy. The source
tensor is also leased on the destination's completion event. Nothing waits on the host.
"""

from __future__ import annotations

from typing import Any

from tenferro_host import ExtensionCapability, Tensor
from tenferro_host.errors import ValidationError
from tenferro_host.provider import (
    BackendSession,
    ExecSession,
    TransferRecord,
    exec_session_of,
    require_resident,
)

from .driver import drv
from .runtime import CudaRuntime, CudaStorage

OP = "copy_from_same_device"


def _cuda_runtime(session: Any, argument: str) -> CudaRuntime:
    """The CUDA runtime of an open backend session or CUDA exec session."""
    if isinstance(session, BackendSession):
        ex = exec_session_of(session, "cuda")
    elif isinstance(session, ExecSession):
        session.supports(ExtensionCapability.SAME_DEVICE_ASYNC_COPY)  # checks it is open here
        ex = session if session.kind == "cuda" else None
    else:
        ex = None
    if ex is None or not isinstance(ex.runtime, CudaRuntime):
        raise ValidationError(
            f"{argument} must be an open CUDA session (backend.session() of a CUDA backend), "
            f"got {type(session).__name__}",
            argument=argument, op=OP,
        )
    return ex.runtime


def copy_from_same_device(src_session: Any, dst_session: Any, tensor: Tensor) -> Tensor:
    """Copy ``tensor`` from the source session's runtime into the destination's domain.

    Both runtimes must run on the same physical GPU (UUID); the result is a compact tensor of
    the destination runtime. Non-compact views are made compact on the source first.
    """
    src = _cuda_runtime(src_session, "src_session")
    dst = _cuda_runtime(dst_session, "dst_session")
    if src is dst:
        raise ValidationError(
            f"source and destination are the same runtime {src.name!r}; use the tensor as it "
            "is (or backend.canonicalize for a compact copy)",
            argument="dst_session", op=OP,
        )
    if src.device != dst.device:
        raise ValidationError(
            f"{src.name!r} ({src.device}) and {dst.name!r} ({dst.device}) are different GPUs; "
            "use tf.cuda.copy_from_peer",
            argument="dst_session", op=OP,
        )
    t = require_resident(src, tensor, argument="tensor", op=OP)
    if not t.is_compact():
        t = src.canonicalize(t)
    out = dst.empty(t.dtype, t.shape)
    if t.numel == 0:
        return out
    assert isinstance(t.storage, CudaStorage) and isinstance(out.storage, CudaStorage)
    d = drv()
    ready = src.record_event()
    dst.stream_wait(ready)
    src.recycle_event(ready)
    with dst.primary:
        dst.ok(
            d.cuMemcpyDtoDAsync(out.storage.ptr, t.storage.ptr + t.offset * t.dtype.itemsize,
                                out.nbytes, dst.stream_handle),
            "copy_from_same_device (cuMemcpyDtoDAsync)", OP,
        )
    done = dst.record_event()
    src.stream_wait(done)
    def release_source(source: Tensor = t) -> None:
        """The lease: holds the source tensor until the copy's event has completed."""

    dst.retirement.retire(done, [release_source, lambda: dst.recycle_event(done)])
    dst.counters.add("d2d_copies")
    dst.counters.record(TransferRecord("same_device", out.nbytes, src.name, dst.name, "d2d"))
    return out


__all__ = ["copy_from_same_device"]

"""Explicit copies between runtimes: ``copy_from_same_device``, ``copy_from_peer``.

Both order the copy with events only: an event on the source stream, the destination stream
waits on it, the copy runs on the destination stream, and an event after it makes the source
stream wait too — so any later (stream-ordered) free of the source happens after the copy. The
source tensor is also leased on the destination's completion event. Nothing waits on the host.
The result is a compact tensor of the destination's allocation domain; a non-compact source
view is made compact on the source first (``canonicalize``), and that copy is leased as well.

Into a runtime whose stream a native capture records, a same-device copy is a constant of the
graph, as in the replayed form: made at once on the source's stream into the capture's memory,
waited for by the captured stream when the capture ends. A copy out of such a runtime, or
between GPUs into it, is refused (CaptureError).

A peer copy (different GPUs) first makes sure the destination device has been granted access
to the source's pool (:func:`tenferro_host_cuda._peer.grant`); without access it raises
PeerAccessError. It never stages through the host.
"""

from __future__ import annotations

from typing import Any

from tenferro_host import (
    BackendError,
    ExtensionCapability,
    PeerAccessError,
    Tensor,
    ValidationError,
)
from tenferro_host.provider import (
    BackendSession,
    ExecSession,
    Lease,
    TransferRecord,
    exec_session_of,
    refuse_in_device_graph,
    require_resident,
)

from . import _peer as peer
from ._driver import check
from ._native_graph import NativeCapture
from ._runtime import CudaRuntime
from ._storage import CudaStorage

SAME_DEVICE = "copy_from_same_device"
PEER = "copy_from_peer"


def _cuda_runtime(session: Any, argument: str, op: str) -> CudaRuntime:
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
            argument=argument,
            op=op,
        )
    return ex.runtime


def _runtimes(src_session: Any, dst_session: Any, op: str) -> tuple[CudaRuntime, CudaRuntime]:
    """The two sessions' runtimes: distinct, on one GPU (UUID) for a same-device copy and on two
    for a peer copy."""
    src = _cuda_runtime(src_session, "src_session", op)
    dst = _cuda_runtime(dst_session, "dst_session", op)
    if src is dst:
        why = (
            f"source and destination are the same runtime {src.name!r}; use the tensor as it "
            "is (or backend.canonicalize for a compact copy)"
        )
    elif (src.device == dst.device) == (op == SAME_DEVICE):
        return src, dst
    elif op == SAME_DEVICE:
        why = (
            f"{src.name!r} ({src.device}) and {dst.name!r} ({dst.device}) are different GPUs; "
            "use tf.cuda.copy_from_peer"
        )
    else:
        why = (
            f"{src.name!r} and {dst.name!r} run on the same GPU ({src.device}); use "
            "tf.cuda.copy_from_same_device"
        )
    raise ValidationError(why, argument="dst_session", op=op)


def copy_from_same_device(src_session: Any, dst_session: Any, tensor: Tensor) -> Tensor:
    """Copy ``tensor`` from the source session's runtime into the destination's domain.

    Both runtimes must run on the same physical GPU (UUID); the result is a compact tensor of
    the destination runtime. Non-compact views are made compact on the source first.
    """
    return _copy(src_session, dst_session, tensor, SAME_DEVICE)


def copy_from_peer(src_session: Any, dst_session: Any, tensor: Tensor) -> Tensor:
    """Copy ``tensor`` from the source session's GPU to the destination session's GPU.

    The GPUs must differ (UUID) and the destination must be able to access the source
    (``tf.cuda.can_access_peer(dst, src)``), else PeerAccessError — never a host-staged copy.
    The result is a compact tensor of the destination runtime. Non-compact views are made
    compact on the source first.
    """
    return _copy(src_session, dst_session, tensor, PEER)


def _copy(src_session: Any, dst_session: Any, tensor: Tensor, op: str) -> Tensor:
    src, dst = _runtimes(src_session, dst_session, op)
    # what the block made in a runtime captured into a CUDA graph has not run yet
    refuse_in_device_graph(
        src,
        f"a copy out of the captured runtime ({op})",
        "copy after the capture, or capture in the replayed form (TENFERRO_CUDA_GRAPHS=replayed)",
        op,
    )
    if op == PEER:  # (made on the source's stream, it would write the other GPU's memory)
        refuse_in_device_graph(
            dst,
            f"a copy between GPUs into the captured runtime ({op})",
            "copy before the capture and pass the copy in (a constant or a slot), or capture "
            "in the replayed form (TENFERRO_CUDA_GRAPHS=replayed)",
            op,
        )
    t = require_resident(src, tensor, argument="tensor", op=op)
    if op == PEER:
        peer.grant(src, dst, op=PEER)
    if not t.is_compact():
        t = src.canonicalize(t)
    recording = dst.recording
    if recording is not None:
        return _copy_into_graph(src, dst, t, recording)
    return _ordered_copy(src, dst, t, op)


def _copy_into_graph(
    src: CudaRuntime, dst: CudaRuntime, t: Tensor, recording: NativeCapture
) -> Tensor:
    """A same-device copy into a runtime whose stream a native capture records: a constant of
    the graph, as in the replayed form. It is made now, on the source's stream (so it is ordered
    with the source's work as that stream orders it), into the capture's memory; the captured
    stream waits for it when the capture ends, before the graph's first launch."""
    out = dst.empty(t.dtype, t.shape)
    if t.numel:
        _memcpy(src, out, t, f"{SAME_DEVICE} {src.name} -> {dst.name}", SAME_DEVICE)
        recording.copied(src, src.record_event(), t)
    _counted(src, dst, out.nbytes, SAME_DEVICE)
    return out


def _memcpy(on: CudaRuntime, out: Tensor, t: Tensor, what: str, op: str) -> None:
    """``t`` (compact) copied into ``out`` on the stream of runtime ``on``."""
    assert isinstance(t.storage, CudaStorage) and isinstance(out.storage, CudaStorage)
    source_ptr = t.storage.ptr + t.offset * t.dtype.itemsize
    with on.primary:
        # cuMemcpyAsync, not cuMemcpyPeerAsync: without the pool grant it fails instead of
        # silently staging through the host.
        check(
            on.driver.cuMemcpyAsync(out.storage.ptr, source_ptr, out.nbytes, on.stream_handle),
            f"{what} (cuMemcpyAsync)",
            uuid=on.uuid_bytes,
            op=op,
            error=PeerAccessError if op == PEER else BackendError,
        )


def _ordered_copy(src: CudaRuntime, dst: CudaRuntime, t: Tensor, op: str) -> Tensor:
    """The event-ordered, leased copy of ``t`` (of ``src``, compact) into a new tensor of
    ``dst``."""
    out = dst.empty(t.dtype, t.shape)
    if t.numel == 0:
        return out
    ready = src.record_event()
    dst.stream_wait(ready)
    src.recycle_event(ready)
    _memcpy(dst, out, t, f"{op} {src.name} -> {dst.name}", op)
    done = dst.record_event()
    src.stream_wait(done)
    # The source tensor is held until the copy's event has completed, then the event recycled.
    dst.retirement.retire(done, [Lease(t), Lease(done, dst.recycle_event)])
    _counted(src, dst, out.nbytes, op)
    return out


def _counted(src: CudaRuntime, dst: CudaRuntime, nbytes: int, op: str) -> None:
    """The copy counted and recorded in the destination's counters."""
    if op == PEER:
        dst.counters.add("peer_copies")
        record = TransferRecord("peer", nbytes, src.name, dst.name, "p2p")
    else:
        dst.counters.add("d2d_copies")
        record = TransferRecord("same_device", nbytes, src.name, dst.name, "d2d")
    dst.counters.record(record)


__all__ = ["copy_from_peer", "copy_from_same_device"]

"""Directional peer access between CUDA devices (docs/contract.md): the matrix and the grants.

Access belongs to an *ordered* pair: ``can_access_peer(dst, src)`` asks the driver whether
``dst`` can read and write memory that lives on ``src`` — every time, never cached, never
assumed symmetric. Before the first peer copy of an ordered pair, :func:`grant` enables the
destination context's peer access to the source context and grants the destination device
read-write access to the source runtime's pool (``cuMemPoolSetAccess``, verified with
``cuMemPoolGetAccess``), then records it. Without that grant CUDA stages a peer copy of pool
memory through the host and reports success; the host never does: no access is a
:class:`~tenferro_host.errors.PeerAccessError`.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from tenferro_host import CudaDeviceId, PeerAccessError, ValidationError
from tenferro_host.provider import BackendSession, ExecSession, exec_session_of

from ._driver import check, drv
from ._runtime import CudaRuntime

#: cuCtxEnablePeerAccess answers this when the contexts are already peers: not a failure.
PEER_ACCESS_ALREADY_ENABLED = 704

_ACCESS_NAMES = {0: "none", 1: "read", 3: "readwrite"}
_grants: weakref.WeakKeyDictionary[CudaRuntime, set[int]] = weakref.WeakKeyDictionary()
_grant_lock = threading.Lock()


def device_ordinal(x: Any, argument: str, op: str | None = None) -> int:
    """The device ordinal of a CUDA runtime, CUDA session, ``CudaDeviceId`` or plain int."""
    if isinstance(x, BackendSession):
        x = exec_session_of(x, "cuda")
    if isinstance(x, ExecSession):
        x = x.runtime
    if isinstance(x, CudaRuntime):
        return x.index
    if isinstance(x, CudaDeviceId):
        return x.ordinal
    if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
        count = int(check(drv().cuDeviceGetCount(), "cuDeviceGetCount"))
        if x < count:
            return x
        raise ValidationError(
            f"{argument}: device ordinal {x} does not exist; this process sees {count} CUDA "
            f"device(s), ordinals 0..{count - 1}",
            argument=argument,
            op=op,
        )
    raise ValidationError(
        f"{argument} must be a CUDA runtime, a CUDA session, a CudaDeviceId or a device ordinal, "
        f"got {type(x).__name__}",
        argument=argument,
        op=op,
    )


def _uuid(ordinal: int) -> bytes:
    d = drv()
    dev = check(d.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    return bytes(check(d.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)


def require_peer_pair(dst: int, src: int, op: str | None = None) -> None:
    """A typed error unless ``dst`` and ``src`` are different physical devices (UUID)."""
    if _uuid(dst) == _uuid(src):
        raise ValidationError(
            f"cuda:{dst} and cuda:{src} are the same GPU: not a peer pair (peer access and peer "
            "copies are between two GPUs; between runtimes of one GPU use "
            "tf.cuda.copy_from_same_device)",
            argument="dst",
            op=op,
        )


def can_access_peer(dst: Any, src: Any) -> bool:
    """Whether device ``dst`` can directly access memory on device ``src`` (one direction).

    Asked of the driver on every call (``cuDeviceCanAccessPeer(dst, src)``); the answer for
    ``(src, dst)`` may differ. Both must be different GPUs, else a typed "not a peer pair".
    """
    op = "can_access_peer"
    dst_i, src_i = device_ordinal(dst, "dst", op), device_ordinal(src, "src", op)
    require_peer_pair(dst_i, src_i, op)
    d = drv()
    dst_dev = check(d.cuDeviceGet(dst_i), f"cuDeviceGet({dst_i})")
    src_dev = check(d.cuDeviceGet(src_i), f"cuDeviceGet({src_i})")
    return bool(check(d.cuDeviceCanAccessPeer(dst_dev, src_dev), "cuDeviceCanAccessPeer"))


def has_accessible_peer(ordinal: int) -> bool:
    """Whether device ``ordinal`` can access some other GPU of this process (``PEER_COPY``:
    plausibly available; ``can_access_peer`` answers for one ordered pair)."""
    d = drv()
    count = int(check(d.cuDeviceGetCount(), "cuDeviceGetCount"))
    me = check(d.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    for other in range(count):
        if other != ordinal and _uuid(other) != _uuid(ordinal):
            peer_dev = check(d.cuDeviceGet(other), f"cuDeviceGet({other})")
            if check(d.cuDeviceCanAccessPeer(me, peer_dev), "cuDeviceCanAccessPeer"):
                return True
    return False


def link_attributes(dst: Any, src: Any) -> dict[str, int | None]:
    """What the driver says about the link from ``src`` to ``dst`` (cuDeviceGetP2PAttribute):
    ``access_supported``, ``native_atomic_supported``, ``performance_rank`` (lower is faster
    relative to the system's other pairs); None for an attribute this driver does not report."""
    op = "link_attributes"
    dst_i, src_i = device_ordinal(dst, "dst", op), device_ordinal(src, "src", op)
    require_peer_pair(dst_i, src_i, op)
    d = drv()
    A = d.CUdevice_P2PAttribute  # noqa: N806 - the driver's enum class
    dst_dev = check(d.cuDeviceGet(dst_i), f"cuDeviceGet({dst_i})")
    src_dev = check(d.cuDeviceGet(src_i), f"cuDeviceGet({src_i})")
    out: dict[str, int | None] = {}
    for key, attr in (
        ("access_supported", A.CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED),
        ("native_atomic_supported", A.CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED),
        ("performance_rank", A.CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK),
    ):
        result = d.cuDeviceGetP2PAttribute(attr, src_dev, dst_dev)
        out[key] = int(result[1]) if int(result[0]) == 0 else None
    return out


def pool_access(src: CudaRuntime, dst: Any) -> str:
    """Access of device ``dst`` to ``src``'s pool as the driver reports it now
    (``cuMemPoolGetAccess``): ``none``, ``read`` or ``readwrite``."""
    d = src.driver
    location = d.CUmemLocation()
    location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    location.id = device_ordinal(dst, "dst", "pool_access")
    flags = src.ok(d.cuMemPoolGetAccess(src.memory.handle, location), "cuMemPoolGetAccess")
    return _ACCESS_NAMES.get(int(flags), f"flags {int(flags)}")


def granted(src: CudaRuntime) -> frozenset[int]:
    """Device ordinals this host has granted access to ``src``'s pool (the record)."""
    with _grant_lock:
        return frozenset(_grants.get(src, ()))


def grant(src: CudaRuntime, dst: CudaRuntime, op: str | None = None) -> None:
    """Give ``dst``'s device direct access to ``src``'s memory, once per ordered pair and pool.

    PeerAccessError when the driver reports no access from ``dst`` to ``src``, or when the
    pool does not report read-write access after the grant.
    """
    with _grant_lock:
        if dst.index in _grants.get(src, ()):
            return
        if not can_access_peer(dst, src):
            raise PeerAccessError(
                f"{dst.name} ({dst.device}) cannot access memory of {src.name} ({src.device}): "
                "the driver reports no peer access for this direction. There is no host-staged "
                "fallback: download and upload explicitly, or pick a pair that "
                "tf.cuda.can_access_peer(dst, src) reports (see tenferro-host caps --probe-p2p)",
                op=op,
            )
        d = dst.driver
        with dst.primary:
            result = d.cuCtxEnablePeerAccess(src.primary.handle, 0)
        if int(result[0]) != PEER_ACCESS_ALREADY_ENABLED:
            check(
                result,
                f"cuCtxEnablePeerAccess ({dst.name} -> {src.name})",
                uuid=dst.uuid_bytes,
                op=op,
                error=PeerAccessError,
            )
        desc = d.CUmemAccessDesc()
        desc.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = dst.index
        desc.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        check(
            d.cuMemPoolSetAccess(src.memory.handle, [desc], 1),
            "cuMemPoolSetAccess",
            uuid=src.uuid_bytes,
            op=op,
            error=PeerAccessError,
        )
        state = pool_access(src, dst)
        if state != "readwrite":
            raise PeerAccessError(
                f"after cuMemPoolSetAccess the pool of {src.name} reports {state!r} access for "
                f"{dst.name}, not 'readwrite'; peer copies in this direction are not possible",
                op=op,
            )
        _grants.setdefault(src, set()).add(dst.index)


__all__ = [
    "can_access_peer",
    "device_ordinal",
    "grant",
    "granted",
    "has_accessible_peer",
    "link_attributes",
    "pool_access",
    "require_peer_pair",
]

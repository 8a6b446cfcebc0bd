"""A simulated CUDA driver with several devices, for the peer tests on machines without a GPU.

It stands in for ``cuda.bindings.driver`` behind ``tenferro_host_cuda._driver.drv()`` and
implements the calls the CUDA runtime, the copies and the peer module make, with the driver's
result convention ``(CUresult, *values)``. Types and enums come from the real module (they load
without a driver); any other call is an AttributeError naming it. Memory is host bytes per
allocation; work runs when enqueued (stream order is then trivially kept, so ordering is
checked on :attr:`FakeDriver.calls`). Peer semantics follow the measured hardware: a
``cuMemcpyAsync`` touching another device's pool memory fails with CUDA_ERROR_INVALID_VALUE
until that pool grants the stream's device access; ``drop_peer_writes`` makes cross-device
copies "succeed" without writing, as broken IOMMU setups do.
"""

from __future__ import annotations

import threading
import uuid as uuid_module
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as real

SUCCESS = real.CUresult.CUDA_SUCCESS
INVALID_VALUE = real.CUresult.CUDA_ERROR_INVALID_VALUE
INVALID_DEVICE = real.CUresult.CUDA_ERROR_INVALID_DEVICE
ALREADY_ENABLED = real.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
_ATTRS = {
    "COMPUTE_CAPABILITY_MAJOR": 9,
    "COMPUTE_CAPABILITY_MINOR": 0,
    "MULTIPROCESSOR_COUNT": 132,
    "WARP_SIZE": 32,
    "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_BLOCK_DIM_X": 1024,
    "MAX_BLOCK_DIM_Y": 1024,
    "MAX_BLOCK_DIM_Z": 64,
    "MAX_GRID_DIM_X": 2**31 - 1,
    "MAX_GRID_DIM_Y": 65535,
    "MAX_GRID_DIM_Z": 65535,
    "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
    "MEMORY_POOLS_SUPPORTED": 1,
}


class _Allocation:
    __slots__ = ("data", "device", "pool", "ptr")

    def __init__(self, ptr: int, nbytes: int, device: int, pool: int) -> None:
        self.ptr, self.device, self.pool = ptr, device, pool
        self.data = bytearray(nbytes)


class FakeDriver:
    """``devices`` GPUs; ``peer(dst, src)`` answers cuDeviceCanAccessPeer for an ordered pair."""

    def __init__(
        self,
        devices: int = 2,
        *,
        peer: Callable[[int, int], bool] | None = None,
        drop_peer_writes: bool = False,
    ) -> None:
        self.devices = devices
        self.peer = peer or (lambda dst, src: True)
        self.drop_peer_writes = drop_peer_writes
        self.uuids = [uuid_module.UUID(int=0x7E4F_0000 + i).bytes for i in range(devices)]
        self.calls: list[tuple[Any, ...]] = []
        self.peer_queries: list[tuple[int, int]] = []
        self.freed: list[int] = []
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._next = {"ctx": 1, "stream": 1, "pool": 1, "event": 1}
        self._stream_device: dict[int, int] = {}
        self._pool_device: dict[int, int] = {}
        self._pool_access: dict[int, dict[int, int]] = {}
        self._ctx_peers: set[tuple[int, int]] = set()
        self._allocations: dict[int, _Allocation] = {}
        self._free_lists: dict[tuple[int, int], list[int]] = {}
        self._base = [(i + 1) << 40 for i in range(devices)]

    # Types and enums of the real module; never its functions.
    def __getattr__(self, name: str) -> Any:
        value = getattr(real, name)
        if isinstance(value, type):
            return value
        raise AttributeError(f"the fake CUDA driver has no {name}; add it to {__name__}")

    def _new(self, kind: str) -> int:
        with self._lock:
            n = self._next[kind]
            self._next[kind] += 1
            return n

    def _log(self, *entry: Any) -> None:
        self.calls.append(entry)

    # -- errors, init, devices ----------
    def cuInit(self, flags: int) -> tuple[Any]:
        return (SUCCESS,)

    def cuGetErrorName(self, err: Any) -> tuple[Any, bytes]:
        return SUCCESS, real.CUresult(int(err)).name.encode()

    def cuGetErrorString(self, err: Any) -> tuple[Any, bytes]:
        return SUCCESS, b"simulated failure"

    def cuDriverGetVersion(self) -> tuple[Any, int]:
        return SUCCESS, 13000

    def cuDeviceGetCount(self) -> tuple[Any, int]:
        return SUCCESS, self.devices

    def cuDeviceGet(self, ordinal: int) -> tuple[Any, Any]:
        if not 0 <= ordinal < self.devices:
            return INVALID_DEVICE, None
        return SUCCESS, real.CUdevice(ordinal)

    def cuDeviceGetName(self, length: int, dev: Any) -> tuple[Any, bytes]:
        return SUCCESS, b"Fake H200\0"

    def cuDeviceGetUuid(self, dev: Any) -> tuple[Any, Any]:
        class Uuid:
            bytes = self.uuids[int(dev)]

        return SUCCESS, Uuid()

    def cuDeviceTotalMem(self, dev: Any) -> tuple[Any, int]:
        return SUCCESS, 1 << 36

    def cuDeviceGetAttribute(self, attr: Any, dev: Any) -> tuple[Any, int]:
        name = attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")
        if name == "HOST_NUMA_ID":
            return SUCCESS, int(dev)
        return SUCCESS, _ATTRS[name]

    def cuDeviceGetPCIBusId(self, length: int, dev: Any) -> tuple[Any, bytes]:
        return SUCCESS, f"0000:{0x18 + int(dev):02x}:00.0\0".encode()

    def cuDeviceCanAccessPeer(self, dev: Any, peer_dev: Any) -> tuple[Any, int]:
        dst, src = int(dev), int(peer_dev)
        self.peer_queries.append((dst, src))
        return SUCCESS, int(dst != src and self.peer(dst, src))

    def cuDeviceGetP2PAttribute(self, attr: Any, src: Any, dst: Any) -> tuple[Any, int]:
        if attr == real.CUdevice_P2PAttribute.CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
            return SUCCESS, 0
        return SUCCESS, int(self.peer(int(dst), int(src)))

    # -- contexts ----------
    def cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple[Any, Any]:
        return SUCCESS, real.CUcontext(100 + int(dev))

    def cuDevicePrimaryCtxRelease(self, dev: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuCtxGetCurrent(self) -> tuple[Any, Any]:
        return SUCCESS, real.CUcontext(getattr(self._tls, "ctx", 0))

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[Any]:
        self._tls.ctx = int(ctx)
        return (SUCCESS,)

    def _current_device(self) -> int:
        ctx = getattr(self._tls, "ctx", 0)
        assert ctx >= 100, "no context is current"
        return ctx - 100

    def cuCtxEnablePeerAccess(self, peer_ctx: Any, flags: int) -> tuple[Any]:
        pair = (self._current_device(), int(peer_ctx) - 100)
        self._log("cuCtxEnablePeerAccess", *pair)
        if not self.peer(*pair):
            return (real.CUresult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,)
        if pair in self._ctx_peers:
            return (ALREADY_ENABLED,)
        self._ctx_peers.add(pair)
        return (SUCCESS,)

    # -- streams and events ----------
    def cuStreamCreate(self, flags: Any) -> tuple[Any, Any]:
        n = self._new("stream")
        self._stream_device[n] = self._current_device()
        return SUCCESS, real.CUstream(n)

    def cuStreamDestroy(self, stream: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuStreamSynchronize(self, stream: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuEventCreate(self, flags: Any) -> tuple[Any, Any]:
        return SUCCESS, real.CUevent(self._new("event"))

    def cuEventRecord(self, event: Any, stream: Any) -> tuple[Any]:
        self._log("cuEventRecord", int(event), int(stream))
        return (SUCCESS,)

    def cuEventQuery(self, event: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuEventSynchronize(self, event: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuEventDestroy(self, event: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuStreamWaitEvent(self, stream: Any, event: Any, flags: int) -> tuple[Any]:
        self._log("cuStreamWaitEvent", int(stream), int(event))
        return (SUCCESS,)

    # -- pools and memory ----------
    def cuMemPoolCreate(self, props: Any) -> tuple[Any, Any]:
        n = self._new("pool")
        self._pool_device[n] = int(props.location.id)
        self._pool_access[n] = {}
        return SUCCESS, real.CUmemoryPool(n)

    def cuMemPoolSetAttribute(self, pool: Any, attr: Any, value: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuMemPoolGetAttribute(self, pool: Any, attr: Any) -> tuple[Any, int]:
        return SUCCESS, 0

    def cuMemPoolTrimTo(self, pool: Any, keep: int) -> tuple[Any]:
        return (SUCCESS,)

    def cuMemPoolDestroy(self, pool: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuMemPoolSetAccess(self, pool: Any, descs: list[Any], count: int) -> tuple[Any]:
        owner = self._pool_device[int(pool)]
        for desc in descs[:count]:
            device = int(desc.location.id)
            if device == owner or not self.peer(device, owner):
                return (INVALID_DEVICE,)
            self._pool_access[int(pool)][device] = int(desc.flags)
            self._log("cuMemPoolSetAccess", owner, device)
        return (SUCCESS,)

    def cuMemPoolGetAccess(self, pool: Any, location: Any) -> tuple[Any, Any]:
        device = int(location.id)
        if device == self._pool_device[int(pool)]:
            flags = 3
        else:
            flags = self._pool_access[int(pool)].get(device, 0)
        return SUCCESS, real.CUmemAccess_flags(flags)

    def cuMemAllocFromPoolAsync(self, nbytes: int, pool: Any, stream: Any) -> tuple[Any, int]:
        device = self._pool_device[int(pool)]
        reuse = self._free_lists.get((int(pool), nbytes))
        if reuse:
            ptr = reuse.pop()
        else:
            with self._lock:
                ptr = self._base[device]
                self._base[device] += (nbytes + 255) // 256 * 256
        self._allocations[ptr] = _Allocation(ptr, nbytes, device, int(pool))
        self._log("cuMemAllocFromPoolAsync", ptr, int(stream))
        return SUCCESS, ptr

    def cuMemFreeAsync(self, ptr: Any, stream: Any) -> tuple[Any]:
        alloc = self._allocations.pop(int(ptr))
        self._free_lists.setdefault((alloc.pool, len(alloc.data)), []).append(alloc.ptr)
        self.freed.append(alloc.ptr)
        self._log("cuMemFreeAsync", alloc.ptr, int(stream))
        return (SUCCESS,)

    def _find(self, address: int, nbytes: int) -> tuple[_Allocation, int] | None:
        for alloc in self._allocations.values():
            if alloc.ptr <= address and address + nbytes <= alloc.ptr + len(alloc.data):
                return alloc, address - alloc.ptr
        return None

    def cuMemGetAddressRange(self, address: Any) -> tuple[Any, int, int]:
        found = self._find(int(address), 1)
        if found is None:
            return (INVALID_VALUE, 0, 0)
        alloc = found[0]
        return (SUCCESS, alloc.ptr, len(alloc.data))

    def _accessible(self, alloc: _Allocation, device: int) -> bool:
        return alloc.device == device or self._pool_access[alloc.pool].get(device, 0) == 3

    def cuMemcpyHtoDAsync(self, dst: Any, src: int, nbytes: int, stream: Any) -> tuple[Any]:
        import ctypes

        found = self._find(int(dst), nbytes)
        assert found is not None, "upload to unallocated memory"
        alloc, off = found
        alloc.data[off : off + nbytes] = ctypes.string_at(src, nbytes)
        self._log("cuMemcpyHtoDAsync", int(dst), nbytes, int(stream))
        return (SUCCESS,)

    def cuMemcpyDtoHAsync(self, dst: int, src: Any, nbytes: int, stream: Any) -> tuple[Any]:
        import ctypes

        found = self._find(int(src), nbytes)
        assert found is not None, "download from unallocated memory"
        alloc, off = found
        ctypes.memmove(dst, bytes(alloc.data[off : off + nbytes]), nbytes)
        self._log("cuMemcpyDtoHAsync", int(src), nbytes, int(stream))
        return (SUCCESS,)

    def cuMemsetD8Async(self, dst: Any, value: int, nbytes: int, stream: Any) -> tuple[Any]:
        found = self._find(int(dst), nbytes)
        assert found is not None
        alloc, off = found
        alloc.data[off : off + nbytes] = bytes([value]) * nbytes
        return (SUCCESS,)

    def cuMemcpyAsync(self, dst: Any, src: Any, nbytes: int, stream: Any) -> tuple[Any]:
        device = self._stream_device[int(stream)]
        d, s = self._find(int(dst), nbytes), self._find(int(src), nbytes)
        self._log("cuMemcpyAsync", int(dst), int(src), nbytes, int(stream))
        if (
            d is None
            or s is None
            or not (self._accessible(d[0], device) and self._accessible(s[0], device))
        ):
            return (INVALID_VALUE,)
        (dst_alloc, d_off), (src_alloc, s_off) = d, s
        if self.drop_peer_writes and dst_alloc.device != src_alloc.device:
            return (SUCCESS,)
        dst_alloc.data[d_off : d_off + nbytes] = src_alloc.data[s_off : s_off + nbytes]
        return (SUCCESS,)

    def cuMemcpyPeerAsync(
        self, dst: Any, dst_ctx: Any, src: Any, src_ctx: Any, nbytes: int, stream: Any
    ) -> tuple[Any]:
        """Copies whatever the access (real drivers stage an ungranted copy through the host)."""
        d, s = self._find(int(dst), nbytes), self._find(int(src), nbytes)
        self._log("cuMemcpyPeerAsync", int(dst), int(src), nbytes, int(stream))
        if d is None or s is None:
            return (INVALID_VALUE,)
        (dst_alloc, d_off), (src_alloc, s_off) = d, s
        dst_alloc.data[d_off : d_off + nbytes] = src_alloc.data[s_off : s_off + nbytes]
        return (SUCCESS,)

    # -- helpers for tests ----------
    def stream_of(self, runtime: Any) -> int:
        return int(runtime.stream_handle)

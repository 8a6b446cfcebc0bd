"""The devices, pools and memory of the fake CUDA driver (:class:`support.driver_stand_in.
FakeDriver`, the one driver double of the tests), in a room of their own.

Memory is host bytes per allocation, made on first use; work runs when enqueued (stream order
is then trivially kept, so ordering is checked on the driver's ``calls``). Peer semantics follow
the measured hardware: a ``cuMemcpyAsync`` touching another device's pool memory fails with
CUDA_ERROR_INVALID_VALUE until that pool grants the stream's device access;
``drop_peer_writes`` makes cross-device copies "succeed" without writing, as broken IOMMU
setups do. Memory the driver did not allocate (a framework's buffer behind a borrow) is
foreign: copies to and from it succeed without moving bytes, and its address range is unknown.
"""

from __future__ import annotations

import ctypes
import threading
import uuid as uuid_module
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cuda.bindings import driver as real

SUCCESS = real.CUresult.CUDA_SUCCESS
INVALID_VALUE = real.CUresult.CUDA_ERROR_INVALID_VALUE
INVALID_DEVICE = real.CUresult.CUDA_ERROR_INVALID_DEVICE
ALREADY_ENABLED = real.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY
STREAM_CAPTURE_UNSUPPORTED = 900  # CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
#: device d's primary context is CTX + d
CTX = 0x100
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
    __slots__ = ("_data", "device", "nbytes", "pool", "ptr")

    def __init__(self, ptr: int, nbytes: int, device: int, pool: int) -> None:
        self.ptr, self.nbytes, self.device, self.pool = ptr, nbytes, device, pool
        self._data: bytearray | None = None

    @property
    def data(self) -> bytearray:
        """The bytes, made at their first read or write (most allocations are never touched)."""
        if self._data is None:
            self._data = bytearray(self.nbytes)
        return self._data


class DeviceMemory:
    """The driver's device, pool and memory calls: ``devices`` GPUs; ``peer(dst, src)``
    answers cuDeviceCanAccessPeer for an ordered pair. ``live`` maps each allocated pointer to
    its size; ``oom`` makes the next pool allocations fail with CUDA_ERROR_OUT_OF_MEMORY;
    ``arena_live`` holds the ``cuMemAlloc`` blocks (a native graph's arena) not freed."""

    if TYPE_CHECKING:  # the other parts' (FakeDriver's)
        calls: list[tuple[str, Any]]
        capturing: dict[int, int]
        stream_devices: dict[int, int]
        CUgraphNodeType: Any

        def _current_device(self) -> int: ...

        def node(self, stream: int, kind: int, func: int, words: list[int]) -> None: ...

    def __init__(
        self, devices: int, peer: Callable[[int, int], bool] | None, drop_peer_writes: bool
    ) -> None:
        self.devices = devices
        self.peer = peer or (lambda dst, src: True)
        self.drop_peer_writes = drop_peer_writes
        self.uuids = [uuid_module.UUID(int=0x7E4F_0000 + i).bytes for i in range(devices)]
        self.peer_queries: list[tuple[int, int]] = []
        self.live: dict[int, int] = {}
        self.arena_live: dict[int, int] = {}
        self.oom = 0
        self._lock = threading.Lock()
        self._pools = 0
        self._pool_device: dict[int, int] = {}
        self._pool_access: dict[int, dict[int, int]] = {}
        self._ctx_peers: set[tuple[int, int]] = set()
        self._allocations: dict[int, _Allocation] = {}
        self._free_lists: dict[tuple[int, int], list[int]] = {}
        self._base = [(i + 1) << 40 for i in range(devices)]
        self._arena = 0x10000

    # -- devices ----------
    def cuInit(self, flags: int) -> tuple[Any]:
        return (SUCCESS,)

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

    def cuCtxEnablePeerAccess(self, peer_ctx: Any, flags: int) -> tuple[Any]:
        pair = (self._current_device(), int(peer_ctx) - CTX)
        self.calls.append(("cuCtxEnablePeerAccess", pair))
        if not self.peer(*pair):
            return (real.CUresult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,)
        if pair in self._ctx_peers:
            return (ALREADY_ENABLED,)
        self._ctx_peers.add(pair)
        return (SUCCESS,)

    # -- pools ----------
    def cuMemPoolCreate(self, props: Any) -> tuple[Any, Any]:
        with self._lock:
            self._pools += 1
            pool = self._pools
        self._pool_device[pool] = int(props.location.id)
        self._pool_access[pool] = {}
        return SUCCESS, real.CUmemoryPool(pool)

    def cuMemPoolSetAttribute(self, pool: Any, attr: Any, value: Any) -> tuple[Any]:
        return (SUCCESS,)

    def cuMemPoolGetAttribute(self, pool: Any, attr: Any) -> tuple[Any, int]:
        """Every attribute answers the bytes the pool has allocated and not freed."""
        mine = int(pool)
        return SUCCESS, sum(a.nbytes for a in self._allocations.values() if a.pool == mine)

    def cuMemPoolTrimTo(self, pool: Any, keep: int) -> tuple[Any]:
        self.calls.append(("trim", keep))
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
            self.calls.append(("cuMemPoolSetAccess", (owner, device)))
        return (SUCCESS,)

    def cuMemPoolGetAccess(self, pool: Any, location: Any) -> tuple[Any, Any]:
        device = int(location.id)
        if device == self._pool_device[int(pool)]:
            flags = 3
        else:
            flags = self._pool_access[int(pool)].get(device, 0)
        return SUCCESS, real.CUmemAccess_flags(flags)

    # -- memory ----------
    def cuMemAllocFromPoolAsync(self, nbytes: int, pool: Any, stream: Any) -> tuple[Any, Any]:
        self.calls.append(("alloc", nbytes))
        if stream in self.capturing:  # a pool allocation would be a node the graph must free
            return (STREAM_CAPTURE_UNSUPPORTED, None)
        if self.oom:
            self.oom -= 1
            return (OUT_OF_MEMORY, None)
        pool = int(pool)
        reuse = self._free_lists.get((pool, nbytes))
        if reuse:
            ptr = reuse.pop()
        else:
            device = self._pool_device[pool]
            with self._lock:
                ptr = self._base[device]
                self._base[device] += (nbytes + 255) // 256 * 256
        self._allocations[ptr] = _Allocation(ptr, nbytes, self._pool_device[pool], pool)
        self.live[ptr] = nbytes
        return SUCCESS, ptr

    def cuMemFreeAsync(self, ptr: Any, stream: Any) -> tuple[Any]:
        self.calls.append(("free", (ptr, stream)))
        if stream in self.capturing:
            return (STREAM_CAPTURE_UNSUPPORTED,)
        del self.live[int(ptr)]
        alloc = self._allocations.pop(int(ptr), None)
        if alloc is not None:  # (a test may plant a pointer in ``live`` alone)
            self._free_lists.setdefault((alloc.pool, alloc.nbytes), []).append(alloc.ptr)
        return (SUCCESS,)

    def cuMemAlloc(self, nbytes: int) -> tuple[Any, int]:
        self.calls.append(("cuMemAlloc", nbytes))
        ptr, self._arena = self._arena, self._arena + nbytes
        self.arena_live[ptr] = nbytes
        return (SUCCESS, ptr)

    def cuMemFree(self, ptr: int) -> tuple[Any]:
        self.calls.append(("cuMemFree", ptr))
        del self.arena_live[ptr]
        return (SUCCESS,)

    def _find(self, address: int, nbytes: int) -> tuple[_Allocation, int] | None:
        for alloc in self._allocations.values():
            if alloc.ptr <= address and address + nbytes <= alloc.ptr + alloc.nbytes:
                return alloc, address - alloc.ptr
        return None

    def cuMemGetAddressRange(self, address: Any) -> tuple[Any, int, int]:
        found = self._find(int(address), 1)
        if found is None:  # foreign memory: an import trusts its producer
            return (INVALID_VALUE, 0, 0)
        alloc = found[0]
        return (SUCCESS, alloc.ptr, alloc.nbytes)

    def _accessible(self, alloc: _Allocation, device: int) -> bool:
        return alloc.device == device or self._pool_access[alloc.pool].get(device, 0) == 3

    # -- copies ----------
    def cuMemcpyHtoDAsync(self, dst: Any, src: int, nbytes: int, stream: Any) -> tuple[Any]:
        self.calls.append(("cuMemcpyHtoDAsync", (int(dst), nbytes, int(stream))))
        found = self._find(int(dst), nbytes)
        if found is not None:
            alloc, off = found
            alloc.data[off : off + nbytes] = ctypes.string_at(src, nbytes)
        return (SUCCESS,)

    def cuMemcpyDtoHAsync(self, dst: int, src: Any, nbytes: int, stream: Any) -> tuple[Any]:
        self.calls.append(("cuMemcpyDtoHAsync", (int(src), nbytes, int(stream))))
        found = self._find(int(src), nbytes)
        if found is not None:
            alloc, off = found
            ctypes.memmove(dst, bytes(alloc.data[off : off + nbytes]), nbytes)
        return (SUCCESS,)

    def cuMemsetD8Async(self, dst: Any, value: int, nbytes: int, stream: Any) -> tuple[Any]:
        self.calls.append(("cuMemsetD8Async", dst))
        if stream in self.capturing:
            self.node(stream, self.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET, 0, [dst])
            return (SUCCESS,)
        found = self._find(int(dst), nbytes)
        if found is not None:
            alloc, off = found
            alloc.data[off : off + nbytes] = bytes([value]) * nbytes
        return (SUCCESS,)

    def cuMemcpyAsync(self, dst: Any, src: Any, nbytes: int, stream: Any) -> tuple[Any]:
        self.calls.append(("cuMemcpyAsync", (dst, src, nbytes, stream)))
        if stream in self.capturing:
            self.node(stream, self.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY, 0, [dst, src])
            return (SUCCESS,)
        d, s = self._find(int(dst), nbytes), self._find(int(src), nbytes)
        if d is None or s is None:  # foreign memory at either end: no bytes move
            return (SUCCESS,)
        device = self.stream_devices[int(stream)]
        (dst_alloc, d_off), (src_alloc, s_off) = d, s
        if not (self._accessible(dst_alloc, device) and self._accessible(src_alloc, device)):
            return (INVALID_VALUE,)
        if self.drop_peer_writes and dst_alloc.device != src_alloc.device:
            return (SUCCESS,)
        dst_alloc.data[d_off : d_off + nbytes] = src_alloc.data[s_off : s_off + nbytes]
        return (SUCCESS,)

    def cuMemcpyPeerAsync(
        self, dst: Any, dst_ctx: Any, src: Any, src_ctx: Any, nbytes: int, stream: Any
    ) -> tuple[Any]:
        """Copies whatever the access (real drivers stage an ungranted copy through the host)."""
        d, s = self._find(int(dst), nbytes), self._find(int(src), nbytes)
        self.calls.append(("cuMemcpyPeerAsync", (int(dst), int(src), nbytes, int(stream))))
        if d is None or s is None:
            return (INVALID_VALUE,)
        (dst_alloc, d_off), (src_alloc, s_off) = d, s
        dst_alloc.data[d_off : d_off + nbytes] = src_alloc.data[s_off : s_off + nbytes]
        return (SUCCESS,)

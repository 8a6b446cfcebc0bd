"""The CUDA runtime: retained primary context, one stream, one stream-ordered memory pool.

One :class:`CudaRuntime` is one allocation domain. Its storage comes from its own pool
(``cuMemPoolCreate`` with a release threshold, ``cuMemAllocFromPoolAsync``/``cuMemFreeAsync``
on its stream), so freeing a tensor whose kernels still run is safe by stream order. Storages
collected by the garbage collector — on any thread, after shutdown, after a fault — and unloaded
modules go to a deferred queue drained at allocation, session entry and ``synchronize``; their
errors are counted, never raised.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from tenferro_host import DType, OutOfMemoryError, Tensor, UnsupportedError
from tenferro_host.provider import FreeList, Lease, Release, ResourceCache, Runtime, Storage

from ._args import LaunchConfig
from ._device import CudaDeviceInfo, query
from ._dlpack import call_deleter, export, import_
from ._driver import (
    NOT_READY,
    OUT_OF_MEMORY,
    POISONED,
    PrimaryContext,
    check,
    drv,
    failure,
    require_healthy,
)
from ._exec_session import CudaExecSession
from ._graph_form import native_graphs
from ._storage import BorrowedStorage, CudaStorage
from ._stream_order import StreamOrder

if TYPE_CHECKING:
    from collections.abc import Callable

    from tenferro_host.provider import BackendSession, HostServices, OpRecording

    from ._foreign_capture import ForeignCapture, GraphPins
    from ._module import Function
    from ._native_graph import NativeCapture

#: Pool memory kept after a synchronization instead of returning it to the OS.
DEFAULT_RELEASE_THRESHOLD = 1 << 30
_MAX_COPY_DIMS = 8

_COPY_SOURCE = r"""
struct alignas(16) B16 { unsigned long long lo, hi; };
template <typename T>
__device__ void gather(T* dst, const T* src, long long n, int ndim, const long long* shape,
                       const long long* stride) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        long long rem = i, off = 0;
        for (int k = 0; k < ndim; ++k) {
            off += (rem % shape[k]) * stride[k];
            rem /= shape[k];
        }
        dst[i] = src[off];
    }
}
#define DIMS8(p) long long p##0, long long p##1, long long p##2, long long p##3, \
    long long p##4, long long p##5, long long p##6, long long p##7
#define GATHER(N, T) extern "C" __global__ void gather_##N( \
    T* dst, const T* src, long long n, int ndim, DIMS8(s), DIMS8(t)) { \
    const long long shape[8] = {s0, s1, s2, s3, s4, s5, s6, s7}; \
    const long long stride[8] = {t0, t1, t2, t3, t4, t5, t6, t7}; \
    gather<T>(dst, src, n, ndim, shape, stride); }
GATHER(1, unsigned char)
GATHER(2, unsigned short)
GATHER(4, unsigned int)
GATHER(8, unsigned long long)
GATHER(16, B16)
"""
#: The gather kernels' parameters: dst, src (pointers), n, ndim, 8 shape and 8 stride entries.
_COPY_CODES = ("Q", "Q", "q", "i", *("q",) * (2 * _MAX_COPY_DIMS))


class CudaRuntime(Runtime):
    """A CUDA runtime on device ``ordinal``: own stream, own pool (allocation domain).

    ``CudaRuntime(ordinal, host)`` makes an additional runtime, as ``host.new_backend("cuda:N")``
    does. Without ``host`` it makes its own ``tenferro_host.Host()`` — which loads the installed
    plugins, so the runtime's ``ex.jit`` and ``ex.run`` find the installed DSL providers and ops —
    and is that host's only CUDA runtime not in ``host.backend``; pass ``host=`` to share one.
    """

    supported_dtypes = Runtime.supported_dtypes

    def __init__(
        self,
        ordinal: int = 0,
        host: HostServices | None = None,
        *,
        release_threshold: int = DEFAULT_RELEASE_THRESHOLD,
    ) -> None:
        if host is None:
            from tenferro_host import Host

            host = Host()
        info = query(ordinal)
        super().__init__(host, "cuda", ordinal)
        self._info = info
        self.uuid_bytes = info.uuid.raw
        require_healthy(self.uuid_bytes)
        d = drv()
        self._dev = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        ctx = check(d.cuDevicePrimaryCtxRetain(self._dev), "cuDevicePrimaryCtxRetain")
        self.primary = PrimaryContext(ctx)
        self._events: list[Any] = []
        self.closed = False  #: read on every planned launch (an attribute, not a property)
        self.deferred_errors = 0
        self.module_counts = {"loaded": 0, "unloaded": 0}
        self._copy_functions: dict[int, Function] = {}
        self._copy_module: Any = None
        self._core_stream: Any = None
        self.resources = ResourceCache()
        #: events ordering this runtime's stream against a framework's (the bridges, and
        #: ``ex.wait_external``/``ex.signal_external``)
        self.streams = StreamOrder(self)
        #: Freed pool blocks by size class; one stream orders their reuse (the storage docstring).
        self.blocks: FreeList[int] = FreeList(rounded=True)
        self.debug_sync = debug_sync_enabled()
        with self.primary:
            self._stream = check(
                d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate"
            )
            props = d.CUmemPoolProps()
            props.allocType = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            props.handleTypes = d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
            props.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            props.location.id = ordinal
            self._pool = check(d.cuMemPoolCreate(props), "cuMemPoolCreate")
            check(
                d.cuMemPoolSetAttribute(
                    self._pool,
                    d.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    d.cuuint64_t(release_threshold),
                ),
                "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
            )

    # -- identity ----------
    @property
    def device(self) -> object:
        """The physical device (UUID): two runtimes on one GPU have the same device."""
        return self._info.uuid

    @property
    def device_info(self) -> CudaDeviceInfo:
        return self._info

    @property
    def cu_device(self) -> Any:
        """The driver's ``CUdevice`` of this runtime (for per-device kernel attributes)."""
        return self._dev

    @property
    def core_stream(self) -> Any:
        """This runtime's stream as a cuda.core ``Stream`` (not owning it) — provider-internal."""
        if self._core_stream is None:
            from cuda.core import Stream

            self._core_stream = Stream.from_handle(int(self._stream))
        return self._core_stream

    @property
    def stream_handle(self) -> Any:
        """The ``CUstream`` of this runtime — provider-internal; users get it via a raw session."""
        return self._stream

    def check_usable(self) -> None:
        require_healthy(self.uuid_bytes)
        if self.closed:
            from tenferro_host import RuntimeStateError

            raise RuntimeStateError(f"runtime {self.name!r} was closed; create a new one")

    def capture_refusal(self) -> str | None:
        if self.debug_sync:
            return (
                "debug-sync mode (TENFERRO_DEBUG_SYNC=1) waits after every launch; unset it "
                "to capture"
            )
        return None

    def foreign_capture(self, allocate: Callable[[int], CudaStorage]) -> ForeignCapture:
        """``with rt.foreign_capture(allocate):`` — this thread's work joins another framework's
        CUDA graph capture (:mod:`._foreign_capture`: no polling, the framework's memory)."""
        from ._foreign_capture import ForeignCapture

        return ForeignCapture(self, allocate)

    def native_capture(self) -> NativeCapture | None:
        """The CUDA graph an ``ex.capture()`` of this runtime records into
        (:mod:`._native_graph`), when ``TENFERRO_CUDA_GRAPHS=native`` asks for one
        (:mod:`._graph_form`)."""
        if not native_graphs():
            return None
        from ._native_graph import NativeCapture

        return NativeCapture(self)

    def graph_pins(self) -> list[GraphPins]:
        """What the live framework graphs that captured this runtime's work keep alive."""
        from ._foreign_capture import live_pins

        return live_pins(self)

    def new_exec_session(self, backend_session: BackendSession) -> CudaExecSession:
        return CudaExecSession(backend_session)

    def _fail(self, result: Any, what: str, op: str | None = None) -> Exception:
        return failure(result, what, uuid=self.uuid_bytes, op=op)

    def ok(self, result: Any, what: str, op: str | None = None) -> Any:
        return check(result, what, uuid=self.uuid_bytes, op=op)

    # -- memory ----------
    def pool_stats(self) -> dict[str, int]:
        """Reserved and used bytes of this runtime's pool (current and high-water marks)."""
        d = drv()
        A = d.CUmemPool_attribute  # noqa: N806 - the driver's enum class
        names = {
            "reserved_current": A.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
            "reserved_high": A.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
            "used_current": A.CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
            "used_high": A.CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        }
        out = {}
        for key, attr in names.items():
            value = d.cuMemPoolGetAttribute(self._pool, attr)
            out[key] = int(value[1]) if int(value[0]) == 0 else -1
        out.update(self.blocks.stats())  # "used" bytes of the pool include the cached blocks
        return out

    def allocate_bytes(self, nbytes: int, op: str | None = None) -> CudaStorage:
        """Stream-ordered allocation of ``nbytes`` (> 0): a cached block of its size class when
        one was freed (no driver call), else the pool; OutOfMemoryError with stats."""
        if self.closed or POISONED:
            self.check_usable()
        return self.allocate_block(nbytes, self.blocks.size_class(nbytes), op)

    def allocate_block(self, nbytes: int, size: int, op: str | None = None) -> CudaStorage:
        """:meth:`allocate_bytes` after its checks, ``size`` being the free list's class of
        ``nbytes`` (0: none; an op replay knows it). A block the newest queued release gives
        back is reused at once when of that class — most often the previous call's output: the
        free list's put and take without the round trip (one stream orders its reuse as it
        orders the free list's) —, held while a capture holds the queue; the rest is drained."""
        deferred = self.deferred
        if deferred:
            if size and self.retirement.refuse_wait is None:
                try:
                    release = deferred.pop()
                except IndexError:  # another thread drained it meanwhile
                    pass
                else:
                    block = release[1]
                    if release[0] == "block" and block[1] == size:
                        self.blocks.hits += 1  # a statistic: unlocked (a race may lose a count)
                        if deferred:
                            self.drain_deferred()
                        self.retirement.poll()
                        return CudaStorage(self, block[0], nbytes, "owned", size, False, release)
                    self._release_deferred([release])
            self.drain_deferred()
        self.retirement.poll()
        if size:
            ptr = self.blocks.take(size)
            if ptr is not None:
                return CudaStorage(self, ptr, nbytes, block=size)
        return self._pool_block(nbytes, size, op)

    def _pool_block(self, nbytes: int, size: int, op: str | None) -> CudaStorage:
        """A new block from the pool, retried once after the cached blocks are given back."""
        result = self._pool_alloc(size or nbytes)
        if int(result[0]) == OUT_OF_MEMORY and self.blocks.cached_bytes:
            self._free_cached()  # cached blocks are free memory: give them back, then retry
            result = self._pool_alloc(size or nbytes)
        if int(result[0]) != 0:
            err = self._fail(result[0], f"allocating {nbytes} bytes", op)
            if isinstance(err, OutOfMemoryError):
                stats = self.pool_stats()
                raise OutOfMemoryError(
                    f"{self.name}: out of device memory allocating {nbytes} bytes "
                    f"(pool: {stats}); free tensors, call runtime.trim(), or use smaller batches",
                    nbytes=nbytes,
                    pool_stats=stats,
                    op=op,
                )
            raise err
        return CudaStorage(self, int(result[1]), nbytes, block=size)

    def _pool_alloc(self, nbytes: int) -> Any:
        with self.primary:
            return drv().cuMemAllocFromPoolAsync(nbytes, self._pool, self._stream)

    def _free_cached(self) -> None:
        """Free every cached block to the pool, stream-ordered (trim, OOM retry, close)."""
        blocks = self.blocks.drain()
        if not blocks:
            return
        d = drv()
        with self.primary:
            for ptr in blocks:
                if int(d.cuMemFreeAsync(ptr, self._stream)[0]) != 0:
                    self.deferred_errors += 1

    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        return self.allocate_bytes(nbytes)

    def output_allocator(self, nbytes: int, dt: DType) -> Callable[[], CudaStorage]:
        """:meth:`allocate_block` bound to ``nbytes`` and its size class (an op replay's
        output)."""
        return partial(self.allocate_block, nbytes, self.blocks.size_class(nbytes))

    def _release_deferred(self, releases: list[Release]) -> None:  # noqa: C901 - one branch per kind
        """Return freed blocks to the block cache, free queued memory (stream-ordered) and
        unload queued modules; count errors. Only what needs the driver makes a driver call."""
        if self.closed:  # the stream was drained at close: only foreign deleters remain to run
            for kind, handle in releases:
                if kind == "dlpack":
                    call_deleter(handle)
                elif kind != "drop":
                    self.deferred_errors += 1
            return
        work: list[Release] = []
        for kind, handle in releases:
            if kind == "drop":  # pins of a graph that died: dropping the reference is the release
                continue
            if kind == "block":
                ptr, size = handle
                if self.blocks.put(size, ptr):
                    continue
                kind, handle = "memory", ptr
            work.append((kind, handle))
        if not work:
            return
        d = drv()
        modules = []
        with self.primary:
            for kind, handle in work:
                if kind == "dlpack":
                    self._retire_deleter(handle)
                elif kind == "module":
                    modules.append(handle)
                elif kind == "call":  # a native graph's destruction or arena (_native_graph)
                    handle()
                elif int(d.cuMemFreeAsync(handle, self._stream)[0]) != 0:
                    self.deferred_errors += 1
            if modules:
                self._retire_unloads(modules)

    def _retire_unloads(self, libraries: list[Any]) -> None:
        """Unload ``libraries`` once the stream passes an event recorded now: every launch of
        their kernels was enqueued before their last reference went (context current)."""
        event = self.record_event(context_current=True)

        self.retirement.retire(
            event, [Lease(libraries, self._unload), Lease(event, self.recycle_event)]
        )

    def _unload(self, libraries: list[Any]) -> None:
        """Unload ``libraries`` (a retired lease: the kernels using them have completed)."""
        d = drv()
        for library in libraries:
            if int(d.cuLibraryUnload(library)[0]) != 0:
                self.deferred_errors += 1
            self.module_counts["unloaded"] += 1

    def _retire_deleter(self, managed: Any) -> None:
        """Run a producer's DLPack deleter once the stream has passed an event recorded now."""
        event = self.record_event()
        self.retirement.retire(
            event, [Lease(managed, call_deleter), Lease(event, self.recycle_event)]
        )

    def free_now(self, storage: CudaStorage) -> None:
        """Free ``storage`` stream-ordered now (session workspaces at exit)."""
        ptr, storage.ptr, storage.release = storage.ptr, 0, None
        if ptr and storage.block and self.blocks.put(storage.block, ptr):
            return
        if ptr:
            with self.primary:
                result = drv().cuMemFreeAsync(ptr, self._stream)
            if int(result[0]) != 0:
                self.deferred_errors += 1

    def trim(self) -> None:
        """Return unused memory to the OS: the cached blocks and the pool's free memory (after
        pending frees complete)."""
        self.drain_deferred()
        self._free_cached()
        self.ok(drv().cuMemPoolTrimTo(self._pool, 0), "cuMemPoolTrimTo")

    # -- primitives ----------
    def _write(self, storage: Storage, data: np.ndarray) -> None:
        assert isinstance(storage, CudaStorage)
        self.check_usable()
        with self.primary:
            self.ok(
                drv().cuMemcpyHtoDAsync(storage.ptr, data.ctypes.data, data.nbytes, self._stream),
                "upload (cuMemcpyHtoDAsync)",
            )

    def _read(self, storage: Storage, byte_offset: int, nbytes: int) -> np.ndarray:
        assert isinstance(storage, CudaStorage)
        self.check_usable()
        out = np.empty(nbytes, dtype=np.uint8)
        d = drv()
        with self.primary:
            self.ok(
                d.cuMemcpyDtoHAsync(
                    out.ctypes.data, storage.ptr + byte_offset, nbytes, self._stream
                ),
                "download (cuMemcpyDtoHAsync)",
            )
            self.ok(d.cuStreamSynchronize(self._stream), "download (cuStreamSynchronize)")
        self.retirement.poll()
        return out

    def _fill_zero(self, storage: Storage) -> None:
        assert isinstance(storage, CudaStorage)
        with self.primary:
            self.ok(
                drv().cuMemsetD8Async(storage.ptr, 0, storage.nbytes, self._stream),
                "zeros (cuMemsetD8Async)",
            )

    def _copy_to_compact(self, src: Tensor, dst: Tensor) -> None:
        assert isinstance(src.storage, CudaStorage) and isinstance(dst.storage, CudaStorage)
        if src.ndim > _MAX_COPY_DIMS:
            raise UnsupportedError(
                f"canonicalize handles up to {_MAX_COPY_DIMS} dimensions, got {src.ndim}",
                backend=self.name,
                feature="canonicalize",
            )
        isz = src.dtype.itemsize
        fn = self._copy_function(isz)
        n = src.numel
        pad = _MAX_COPY_DIMS - src.ndim
        values = (
            dst.storage.ptr,
            src.storage.ptr + src.offset * isz,
            np.int64(n),
            np.int32(src.ndim),
            *map(np.int64, (*src.shape, *(1,) * pad)),
            *map(np.int64, (*src.strides, *(0,) * pad)),
        )
        self.launch_internal(fn, LaunchConfig(min(math.ceil(n / 256), 65535), 256), values)

    def _copy_function(self, itemsize: int) -> Function:
        fn = self._copy_functions.get(itemsize)
        if fn is None:
            if self._copy_module is None:
                from ._images import check_binary
                from ._module import load_image
                from ._nvrtc import NvrtcOptions, compile_source

                image = compile_source(
                    _COPY_SOURCE,
                    NvrtcOptions(std="c++17"),
                    device_arch=self._info.arch,
                    name="tenferro_copy.cu",
                )
                check_binary(image.data)
                self._copy_module = load_image(self, image.data, "cubin", "canonicalize")
            fn = self._copy_functions[itemsize] = self._copy_module.function(f"gather_{itemsize}")
        return fn

    def launch_internal(
        self, fn: Function, config: LaunchConfig, values: tuple[Any, ...], op: str = "canonicalize"
    ) -> None:
        """Launch a host-internal kernel (canonicalize's gather) by the rules of every launch:
        the function's checks, cuda.core's ``launch``, a sticky fault poisons the context, and
        debug mode waits and names the kernel."""
        from . import _launch

        if self.closed or POISONED:  # a poisoned context launches nothing more
            self.check_usable()
        fn.check_config(config, op)
        fn.check_arguments(_COPY_CODES, op)
        with self.primary:
            try:
                (_launch.launch_fn or _launch.core_launch())(
                    self.core_stream, fn.core_config(config), fn.core_kernel, *values
                )
            except Exception as exc:
                raise _launch.launch_failed(self, op, exc, fn, config) from exc
            if self.debug_sync:
                _launch.debug_wait(self, op, self._stream, fn, config)

    def op_replay(self, recording: OpRecording) -> Any:
        """A recorded op call replayed with ``cuLaunchKernel`` (:mod:`._replay`)."""
        from ._replay import RawReplay

        return RawReplay(self, recording)

    # -- events and synchronization ----------
    def record_event(self, *, context_current: bool = False) -> Any:
        """An event recorded on this runtime's stream now (from a recycled pool).

        ``context_current``: the caller (a raw session) already made the primary context
        current, so the guard's driver call is skipped.
        """
        if context_current:
            return self._record_event()
        with self.primary:
            return self._record_event()

    def _record_event(self) -> Any:
        d = drv()
        if self._events:
            event = self._events.pop()
        else:
            event = self.ok(
                d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate"
            )
        self.ok(d.cuEventRecord(event, self._stream), "cuEventRecord")
        self.counters.add("events_recorded")
        return event

    def recycle_event(self, event: Any) -> None:
        self._events.append(event)

    def _event_done(self, event: Any) -> bool:
        result = drv().cuEventQuery(event)
        code = int(result[0])
        if code == 0:
            return True
        if code == NOT_READY:
            return False
        raise self._fail(result[0], "cuEventQuery")

    def _event_wait(self, event: Any) -> None:
        self.ok(drv().cuEventSynchronize(event), "cuEventSynchronize")

    def _synchronize(self) -> None:
        self.check_usable()
        self.drain_deferred()  # first: what it queues behind an event is complete after the wait
        self.ok(drv().cuStreamSynchronize(self._stream), "cuStreamSynchronize")

    def stream_wait(self, event: Any) -> None:
        """Make this runtime's stream wait for ``event`` (no host wait)."""
        self.ok(drv().cuStreamWaitEvent(self._stream, event, 0), "cuStreamWaitEvent")

    def dlpack_device(self) -> tuple[int, int]:
        return (2, self.index)  # kDLCUDA

    def from_dlpack(self, x: Any) -> Tensor:
        """Import a CUDA buffer of this device (zero-copy, "imported" storage of this domain)."""
        return import_(self, x)

    def export_dlpack(self, t: Tensor, stream: Any, **kwargs: Any) -> Any:
        return export(self, t, stream, **kwargs)

    def borrow(
        self,
        ptr: int,
        dt: DType,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        owner: Any = None,
        read_only: bool = False,
    ) -> Tensor:
        """A framework's buffer of this device at ``ptr`` (element 0; non-negative element
        ``strides``) as a tensor, with no DLPack capsule: a bridge's import, per call. The
        caller orders the streams (:attr:`streams`) and keeps the memory valid while the tensor
        is used; ``owner`` (the framework's array) lives as long as the storage."""
        return Tensor(
            BorrowedStorage(self, ptr, dt, shape, strides, owner, read_only), dt, shape, strides
        )

    # -- lifetime ----------
    def close(self) -> None:
        """Wait for the stream, release everything, destroy the stream and pool.

        Storages collected afterwards are counted in ``deferred_errors`` (nothing to free into).
        """
        if self.closed:
            return
        d = drv()
        with self.primary:
            self.ok(d.cuStreamSynchronize(self._stream), "cuStreamSynchronize")
            self.counters.add("synchronizations")
            self.retirement.drain()
            self.resources.clear()
            self._copy_functions.clear()
            self._copy_module = None
            self.drain_deferred()
            self._free_cached()
            self.ok(d.cuStreamSynchronize(self._stream), "cuStreamSynchronize")
            self.retirement.drain()  # the unloads of the modules the cache just dropped
            for event in self._events:
                d.cuEventDestroy(event)
            self._events.clear()
            self.streams.close()
            self.closed = True
            d.cuMemPoolDestroy(self._pool)
            d.cuStreamDestroy(self._stream)
            self._core_stream = None  # a cuda.core view of the destroyed stream: drop it now
        d.cuDevicePrimaryCtxRelease(self._dev)
        self.primary.forget_if_destroyed(self._dev)

    def module_stats(self) -> dict[str, int]:
        """Modules loaded and unloaded by this runtime (retirement evidence)."""
        return dict(self.module_counts)


def debug_sync_enabled() -> bool:
    return os.environ.get("TENFERRO_DEBUG_SYNC", "") not in ("", "0")


__all__ = ["DEFAULT_RELEASE_THRESHOLD", "CudaRuntime", "CudaStorage", "debug_sync_enabled"]

"""The CUDA runtime: retained primary context, one stream, one stream-ordered memory pool.

One :class:`CudaRuntime` is one allocation domain. It composes its jobs: the pool and free
list of its memory (:mod:`._memory_pool`), its events (:mod:`._events`), the releases its
collected storages and unloaded modules queue (:mod:`._releases`, drained at allocation,
session entry and ``synchronize``; their errors counted, never raised), the host's own gather
kernel (:mod:`._gather`), and the imports and exports of foreign memory (:mod:`._dlpack`,
:meth:`CudaRuntime.borrow`). Here: the device, context and stream, the allocator's hot path,
the transfer primitives and the lifetime.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from tenferro_host import DType, Host, RuntimeStateError, Tensor
from tenferro_host.provider import Release, ResourceCache, Runtime, Storage

from ._args import LaunchConfig
from ._device import CudaDeviceInfo, query
from ._dlpack import export, import_
from ._driver import POISONED, PrimaryContext, check, drv, failure, require_healthy
from ._events import EventPool
from ._exec_session import CudaExecSession
from ._foreign_capture import ForeignCapture, GraphPins, live_pins
from ._gather import Gather, launch
from ._graph_form import native_graphs
from ._launch import core_stream
from ._memory_pool import DEFAULT_RELEASE_THRESHOLD, MemoryPool
from ._native_graph import NativeCapture
from ._releases import carry_out
from ._replay import RawReplay
from ._storage import BorrowedStorage, CudaStorage
from ._stream_order import StreamOrder

if TYPE_CHECKING:
    from tenferro_host.provider import BackendSession, HostServices, OpRecording

    from ._module import Function


class CudaRuntime(Runtime):
    """A CUDA runtime on device ``ordinal``: own stream, own pool (allocation domain).

    ``CudaRuntime(ordinal, host)`` makes an additional runtime, as ``host.new_backend("cuda:N")``
    does. Without ``host`` it makes its own ``tenferro_host.Host()`` — which loads the installed
    plugins, so the runtime's ``ex.jit`` and ``ex.run`` find the installed DSL providers and ops —
    and is that host's only CUDA runtime not in ``host.backend``; pass ``host=`` to share one.
    ``driver`` is the driver binding its own calls go to (default: ``cuda.bindings.driver``;
    the tests' stand-in records them).
    """

    supported_dtypes = Runtime.supported_dtypes

    def __init__(
        self,
        ordinal: int = 0,
        host: HostServices | None = None,
        *,
        release_threshold: int = DEFAULT_RELEASE_THRESHOLD,
        driver: Any = None,
    ) -> None:
        self.driver = d = drv() if driver is None else driver
        info = query(ordinal, d)
        super().__init__(Host() if host is None else host, "cuda", ordinal)
        self._info = info
        self.uuid_bytes = info.uuid.raw
        require_healthy(self.uuid_bytes)
        self._dev = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        ctx = check(d.cuDevicePrimaryCtxRetain(self._dev), "cuDevicePrimaryCtxRetain")
        self.primary = PrimaryContext(ctx)
        self.closed = False  #: read on every planned launch (an attribute, not a property)
        #: the native capture recording this runtime's stream now (a copy into it is its own)
        self.recording: NativeCapture | None = None
        self.deferred_errors = 0
        self.module_counts = {"loaded": 0, "unloaded": 0}
        self._core_stream: Any = None
        self.resources = ResourceCache()
        self.debug_sync = debug_sync_enabled()
        self.events = EventPool(self)
        self.gather = Gather(self)
        with self.primary:
            self._stream = check(
                d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate"
            )
            self.memory = MemoryPool(self, release_threshold)
        #: Freed pool blocks by size class (the pool's free list; the compiled call reads it).
        self.blocks = self.memory.blocks
        #: events ordering this runtime's stream against a framework's (the bridges, and
        #: ``ex.wait_external``/``ex.signal_external``)
        self.streams = StreamOrder(self)

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
            self._core_stream = core_stream(int(self._stream))
        return self._core_stream

    @property
    def stream_handle(self) -> Any:
        """The ``CUstream`` of this runtime — provider-internal; users get it via a raw session."""
        return self._stream

    def check_usable(self) -> None:
        require_healthy(self.uuid_bytes)
        if self.closed:
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
        return ForeignCapture(self, allocate)

    def native_capture(self) -> NativeCapture | None:
        """The CUDA graph an ``ex.capture()`` of this runtime records into
        (:mod:`._native_graph`), unless ``TENFERRO_CUDA_GRAPHS=replayed`` asks for the replayed
        form (:mod:`._graph_form`)."""
        return NativeCapture(self) if native_graphs() else None

    def graph_pins(self) -> list[GraphPins]:
        """What the live framework graphs that captured this runtime's work keep alive."""
        return live_pins(self)

    def new_exec_session(self, backend_session: BackendSession) -> CudaExecSession:
        return CudaExecSession(backend_session)

    def fail(self, result: Any, what: str, op: str | None = None) -> Exception:
        """The typed error of a failed driver call of this runtime (poisoning on sticky faults)."""
        return failure(result, what, uuid=self.uuid_bytes, op=op)

    def ok(self, result: Any, what: str, op: str | None = None) -> Any:
        return check(result, what, uuid=self.uuid_bytes, op=op)

    # -- memory ----------
    def pool_stats(self) -> dict[str, int]:
        """Reserved and used bytes of this runtime's pool (current and high-water marks)."""
        return self.memory.stats()

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
        return self.memory.new_block(nbytes, size, op)

    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        return self.allocate_bytes(nbytes)

    def output_allocator(self, nbytes: int, dt: DType) -> Callable[[], CudaStorage]:
        """:meth:`allocate_block` bound to ``nbytes`` and its size class (an op replay's
        output)."""
        return partial(self.allocate_block, nbytes, self.blocks.size_class(nbytes))

    def _release_deferred(self, releases: list[Release]) -> None:
        carry_out(self, releases)

    def free_now(self, storage: CudaStorage) -> None:
        """Free ``storage`` stream-ordered now (session workspaces at exit)."""
        ptr, storage.ptr, storage.release = storage.ptr, 0, None
        if ptr:
            self.memory.give_back(ptr, storage.block)

    def trim(self) -> None:
        """Return unused memory to the OS: the cached blocks and the pool's free memory (after
        pending frees complete)."""
        self.drain_deferred()
        self.memory.trim()

    # -- primitives ----------
    def _write(self, storage: Storage, data: np.ndarray) -> None:
        assert isinstance(storage, CudaStorage)
        self.check_usable()
        with self.primary:
            self.ok(
                self.driver.cuMemcpyHtoDAsync(
                    storage.ptr, data.ctypes.data, data.nbytes, self._stream
                ),
                "upload (cuMemcpyHtoDAsync)",
            )

    def _read(self, storage: Storage, byte_offset: int, nbytes: int) -> np.ndarray:
        assert isinstance(storage, CudaStorage)
        self.check_usable()
        out = np.empty(nbytes, dtype=np.uint8)
        d = self.driver
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
                self.driver.cuMemsetD8Async(storage.ptr, 0, storage.nbytes, self._stream),
                "zeros (cuMemsetD8Async)",
            )

    def _copy_to_compact(self, src: Tensor, dst: Tensor) -> None:
        self.gather.copy(src, dst)

    def launch_internal(
        self, fn: Function, config: LaunchConfig, values: tuple[Any, ...], op: str = "canonicalize"
    ) -> None:
        """Launch a host-internal kernel (canonicalize's gather) by the rules of every launch
        (:func:`._gather.launch`)."""
        launch(self, fn, config, values, op)

    def op_replay(self, recording: OpRecording) -> Any:
        """A recorded op call replayed with ``cuLaunchKernel`` (:mod:`._replay`)."""
        return RawReplay(self, recording)

    # -- events and synchronization ----------
    def record_event(self, *, context_current: bool = False) -> Any:
        """An event recorded on this runtime's stream now (from a recycled pool).

        ``context_current``: the caller (a raw session) already made the primary context
        current, so the guard's driver call is skipped.
        """
        if context_current:
            return self.events.record()
        with self.primary:
            return self.events.record()

    def recycle_event(self, event: Any) -> None:
        self.events.recycle(event)

    def _event_done(self, event: Any) -> bool:
        return self.events.done(event)

    def _event_wait(self, event: Any) -> None:
        self.events.wait(event)

    def _synchronize(self) -> None:
        self.check_usable()
        self.drain_deferred()  # first: what it queues behind an event is complete after the wait
        self.ok(self.driver.cuStreamSynchronize(self._stream), "cuStreamSynchronize")

    def stream_wait(self, event: Any) -> None:
        """Make this runtime's stream wait for ``event`` (no host wait)."""
        self.ok(self.driver.cuStreamWaitEvent(self._stream, event, 0), "cuStreamWaitEvent")

    # -- foreign memory ----------
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
        d = self.driver
        with self.primary:
            self.ok(d.cuStreamSynchronize(self._stream), "cuStreamSynchronize")
            self.counters.add("synchronizations")
            self.retirement.drain()
            self.resources.clear()
            self.gather.clear()
            self.drain_deferred()
            self.memory.free_cached()
            self.ok(d.cuStreamSynchronize(self._stream), "cuStreamSynchronize")
            self.retirement.drain()  # the unloads of the modules the cache just dropped
            self.events.destroy()
            self.streams.close()
            self.closed = True
            self.memory.destroy()
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

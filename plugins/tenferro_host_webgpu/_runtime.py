"""The WebGPU runtime: one wgpu device per runtime, storage buffers as tensor storage.

Each runtime requests its own device from its adapter (with the adapter's limits and
``shader-f16`` when offered), so it has its own queue — the contract's "stream" — and its
own allocation domain. Buffers are ``STORAGE | COPY_SRC | COPY_DST``, padded to 4 bytes; bool
elements are stored as u32. wgpu keeps a buffer alive while submitted work uses it, so no lease
is needed for stream-ordered frees.

A collected tensor's buffer is queued on the runtime's deferred releases (provider/_deferred.py)
and, at the next drain point, kept in its free list (:class:`~tenferro_host.provider.FreeList`,
by exact size: kernels bind a storage buffer whole, and ``buffer.size`` is what robust buffer
access clamps to); the next allocation of that size takes it without ``create_buffer``, and the
bind groups cached for that buffer object (:class:`.pipelines.BindGroups`) stay valid, because a
group names the buffer, whichever tensor owns it now. A buffer leaves the free list only to be
released: when the list is full, on ``trim()``, or when an allocation finds the device full
(then it frees them and retries once). ``pool_stats()`` counts them.

Ordering of reuse. Unlike CUDA, where a block's reuse is stream-ordered by construction, WebGPU
has two ways into a buffer: commands recorded in the runtime's pending encoder, and
``queue.write_buffer`` (uploads), which runs at the start of the *next* ``submit`` — before the
command buffers of that submit. Commands recorded after a buffer's reuse are ordered after its
earlier uses in the same encoder, but an upload into a reused buffer while the encoder still
holds earlier commands on it would run before them. So every kept buffer carries an *epoch*: the
number of submissions after which all its earlier uses were submitted. A write into a storage
whose epoch the queue has not reached submits the pending work first (:meth:`_write`); so does
releasing kept buffers (``destroy`` of a buffer that unsubmitted commands use would make their
submit invalid).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tenferro_host import (
    BackendError,
    DType,
    InvalidLaunchConfigError,
    LaunchError,
    OutOfMemoryError,
    Tensor,
)
from tenferro_host.provider import (
    BackendSession,
    ExecSession,
    FreeList,
    OpRecording,
    Release,
    Runtime,
    Storage,
    fold_grid,
)

from . import strided_copy
from ._exec_session import WebGpuExecSession
from ._storage import WebGpuStorage
from ._uniforms import UniformBlock
from .adapters import adapter
from .device import (
    WebGpuDeviceId,
    WebGpuDeviceInfo,
    device_element_size,
    stored_dtypes,
    unsupported_dtype,
)
from .pipelines import BindGroups, Pipeline, PipelineCache, UniformBuffers
from .queue import CommandQueue

if TYPE_CHECKING:
    from tenferro_host.provider import HostServices

DEBUG_SYNC_ENV = "TENFERRO_DEBUG_SYNC"


class WebGpuRuntime(Runtime):
    """A WebGPU device of one adapter, with its own queue and allocation domain."""

    def __init__(self, host: HostServices, index: int = 0) -> None:
        import wgpu

        info, wgpu_adapter = adapter(index)
        super().__init__(host, "webgpu", index, software=info.software)
        self._wgpu = wgpu
        f16 = "shader-f16" in info.features
        subgroups = "subgroup" in info.features  # wgpu-native's name of WebGPU's "subgroups"
        try:
            self._device = wgpu_adapter.request_device_sync(
                label=f"tenferro webgpu:{index}",
                required_features=[
                    name
                    for name, offered in (("shader-f16", f16), ("subgroup", subgroups))
                    if offered
                ],
                required_limits=dict(wgpu_adapter.limits),
            )
        except (wgpu.GPUError, RuntimeError) as exc:
            raise BackendError(
                f"adapter {info.name!r} ({info.backend}) refused a device: {exc}; choose another "
                "adapter with TENFERRO_WEBGPU_ADAPTER"
            ) from exc
        self._id = WebGpuDeviceId(index, info.name, info.backend)
        self._info = WebGpuDeviceInfo.from_device(info, dict(self._device.limits), f16, subgroups)
        self.supported_dtypes = stored_dtypes(f16)
        self.queue = CommandQueue(self._device)
        self.pipelines = PipelineCache(self._device)
        self.uniforms = UniformBuffers(self._device)
        self.bind_groups = BindGroups(self._device)
        #: Freed storage buffers of this runtime, by exact size, with their epochs.
        self.pool: FreeList[tuple[Any, int]] = FreeList(rounded=False)
        #: Every buffer of the free list's sizes made and not released for good, by id: held
        #: by the runtime, so a storage finalized in a reference cycle by the collector, which
        #: finalizes everything the cycle reaches (its buffer too: wgpu-py then releases it),
        #: never hands the free list a released buffer; its buffer stays reachable from here.
        self._poolable: dict[int, Any] = {}
        self._fold_limit = self._info.max_compute_workgroups_per_dimension
        self._usage = (
            wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        )
        self.debug_sync = os.environ.get(DEBUG_SYNC_ENV, "") not in ("", "0")
        self.wgpu_errors: tuple[type[Exception], ...] = (wgpu.GPUError,)
        #: Bound where an array argument is empty (it has no buffer; the shader never reads it).
        self.placeholder_buffer = self._device.create_buffer(size=4, usage=self._usage)

    # -- identity -------------------------------------------------------------------------------
    @property
    def device(self) -> WebGpuDeviceId:
        return self._id

    @property
    def device_info(self) -> WebGpuDeviceInfo:
        return self._info

    @property
    def max_workgroups_per_dimension(self) -> int:
        """Where dispatches start folding; tests lower it to exercise the fold at small sizes."""
        return self._fold_limit

    @max_workgroups_per_dimension.setter
    def max_workgroups_per_dimension(self, value: int) -> None:
        limit = self._info.max_compute_workgroups_per_dimension
        if not isinstance(value, int) or not 1 <= value <= limit:
            raise InvalidLaunchConfigError(
                f"max_workgroups_per_dimension must be an int in [1, {limit}] (the device "
                f"limit), got {value!r}",
                argument="max_workgroups_per_dimension",
            )
        self._fold_limit = value

    def new_exec_session(self, backend_session: BackendSession) -> ExecSession:
        return WebGpuExecSession(backend_session)

    def op_replay(self, recording: OpRecording) -> Any:
        """A recorded op call's DSL dispatches, replayed (:mod:`._replay`)."""
        from ._replay import op_replay

        return op_replay(self, recording)

    # -- dtypes and limits ----------------------------------------------------------------------
    def _check_dtype(self, dt: DType) -> DType:
        if dt.name not in self.supported_dtypes:
            raise unsupported_dtype(dt, self.name)
        return dt

    def _check_size(self, nbytes: int) -> None:
        """A tensor must fit one buffer and one storage binding (kernels bind it whole); a
        request beyond either limit cannot be satisfied on this device, so it is out of memory
        whatever is freed — ``limit`` says which."""
        for limit, value in (
            ("max_buffer_size", self._info.max_buffer_size),
            ("max_storage_buffer_binding_size", self._info.max_storage_buffer_binding_size),
        ):
            if nbytes > value:
                raise OutOfMemoryError(
                    f"a tensor of {nbytes} device bytes exceeds the adapter's {limit} of "
                    f"{value} bytes on {self.name!r}; split it into smaller tensors or use "
                    "another backend",
                    nbytes=nbytes,
                    pool_stats=self.stats(),
                    limit=limit,
                )

    # -- memory ---------------------------------------------------------------------------------
    def pool_stats(self) -> dict[str, int]:
        """The buffer pool's counters, with the keys of the CUDA runtime's block cache:
        ``cached_bytes``, ``cached_blocks``, ``cache_hits``, ``cache_misses``."""
        self.drain_deferred()
        return self.pool.stats()

    def _release_deferred(self, releases: list[Release]) -> None:
        """Keep collected storages' buffers in the free list, stamped with the epoch after
        which their earlier uses are submitted; release one the full list (or its size)
        refuses."""
        queue = self.queue
        with queue.lock:  # a flush in progress on another thread has not counted its submit yet
            epoch = queue.submissions + queue.pending  # the pending work's submit is next
        pool = self.pool
        for kind, handle in releases:
            if kind == "keep":
                size, buffer = handle
                if pool.put(size, (buffer, epoch)):
                    continue
                self._poolable.pop(id(buffer), None)
            else:
                buffer = handle
            self.bind_groups.forget(buffer)

    def trim(self) -> None:
        """Give cached memory back: destroy every pooled buffer (as on CUDA, where ``trim``
        frees the block cache)."""
        self.drain_deferred()
        self._release_pooled()

    def _release_pooled(self) -> None:
        """Destroy every pooled buffer; pending work that may still use one is submitted first
        (a destroyed buffer in a later submit is invalid; submitted work keeps it until done)."""
        entries = self.pool.drain()
        if not entries:
            return
        if max(epoch for _, epoch in entries) > self.queue.submissions:
            self.queue.flush()
        for buffer, _ in entries:
            self.bind_groups.forget(buffer)
            self._poolable.pop(id(buffer), None)
            buffer.destroy()

    # -- provider primitives --------------------------------------------------------------------
    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        element_size = device_element_size(dt)
        padded = -(-(nbytes // dt.itemsize * element_size) // 4) * 4
        pool = self.pool
        size = pool.size_class(padded)
        deferred = self.deferred
        if deferred:
            # the newest queued release, when of this size class, is reused at once — most often
            # the previous call's output: the free list's put and take without the round trip
            # (as CUDA's allocate_block), held while a capture holds the queue
            if size and self.retirement.refuse_wait is None:
                try:
                    kind, handle = deferred.pop()
                except IndexError:  # another thread drained it meanwhile
                    pass
                else:
                    if kind == "keep" and handle[0] == size:
                        pool.hits += 1  # a statistic: unlocked (a race may lose a count)
                        queue = self.queue
                        with queue.lock:  # its earlier uses: submitted, or in the pending work
                            epoch = queue.submissions + queue.pending
                        if deferred:
                            self.drain_deferred()
                        return WebGpuStorage(self, handle[1], nbytes, dt, element_size, size, epoch)
                    self._release_deferred([(kind, handle)])
            self.drain_deferred()
        if size:
            found = pool.take(size)
            if found is not None:  # a buffer of this size: within the limits checked below
                return WebGpuStorage(self, found[0], nbytes, dt, element_size, size, found[1])
        buffer = self._new_buffer(padded)
        if size:
            self._poolable[id(buffer)] = buffer
        return WebGpuStorage(self, buffer, nbytes, dt, element_size, size)

    def _new_buffer(self, padded: int) -> Any:
        """A new storage buffer of ``padded`` bytes (checked against the limits); where the
        driver cannot satisfy it, again after the pooled buffers are given back."""
        self._check_size(padded)
        wgpu_error = self._wgpu.GPUError
        try:
            return self._device.create_buffer(size=padded, usage=self._usage)
        except wgpu_error as exc:  # within the limits: the driver could not satisfy it
            if not self.pool.cached_bytes:
                raise self._out_of_memory(padded, exc) from exc
        self._release_pooled()  # pooled buffers are free memory: give them back, then retry
        try:
            return self._device.create_buffer(size=padded, usage=self._usage)
        except wgpu_error as again:
            raise self._out_of_memory(padded, again) from again

    def _out_of_memory(self, padded: int, exc: Exception) -> OutOfMemoryError:
        said = " ".join(str(exc).split())
        return OutOfMemoryError(
            f"WebGPU could not allocate {padded} bytes on {self.name!r} "
            f"({type(exc).__name__}: {said}); free tensors, call runtime.trim(), or use smaller "
            "ones",
            nbytes=padded,
            pool_stats=self.stats(),
        )

    def _write(self, storage: Storage, data: np.ndarray) -> None:
        assert isinstance(storage, WebGpuStorage)
        if storage.epoch > self.queue.submissions:
            # A reused buffer that unsubmitted commands may still read or write: write_buffer
            # runs at the start of the next submit, before them, so submit them first.
            self.queue.flush()
        raw = data.astype(np.uint32).view(np.uint8) if storage.widen != 1 else data
        pad = -raw.nbytes % 4
        if pad:
            raw = np.concatenate([raw, np.zeros(pad, dtype=np.uint8)])
        self._device.queue.write_buffer(storage.buffer, 0, raw)

    def _read(self, storage: Storage, byte_offset: int, nbytes: int) -> np.ndarray:
        assert isinstance(storage, WebGpuStorage)
        lo, hi = byte_offset * storage.widen, (byte_offset + nbytes) * storage.widen
        start, stop = lo // 4 * 4, min(-(-hi // 4) * 4, storage.buffer.size)
        raw = np.frombuffer(self.queue.read(storage.buffer, start, stop - start), dtype=np.uint8)
        out = raw[lo - start : hi - start]
        if storage.widen != 1:
            return out.view(np.uint32).astype(np.uint8)
        return out.copy()

    def _fill_zero(self, storage: Storage) -> None:
        assert isinstance(storage, WebGpuStorage)
        with self.queue.lock:
            self.queue.encoder().clear_buffer(storage.buffer)
            self.queue.commit()

    def _copy_to_compact(self, src: Tensor, dst: Tensor) -> None:
        assert isinstance(src.storage, WebGpuStorage) and isinstance(dst.storage, WebGpuStorage)
        elem = strided_copy.storage_word(src.storage.element_size)
        ndim = src.ndim
        count = (-(-src.numel // strided_copy.WORKGROUP), 1, 1)
        limit = self._fold_limit
        physical = fold_grid(count, (limit, limit, limit))
        folded = physical != count
        pipeline = self.pipelines.get(
            ("strided_copy", elem, ndim, folded),
            lambda: (strided_copy.source(elem, ndim, folded), (False, True)),
            what=f"the built-in strided copy ({elem}, rank {ndim})",
        )
        block = UniformBlock()
        block.grid(count, physical)
        uniform = strided_copy.uniforms(block, src.numel, src.offset, src.shape, src.strides)
        buffers = [src.storage.buffer, dst.storage.buffer]
        self.dispatch(pipeline, self.uniforms.new(uniform), buffers, physical)
        self.queue.commit()

    def _synchronize(self) -> None:
        self.queue.wait_idle()

    def new_flag_buffer(self) -> Any:
        """A 4-byte storage word a shader may set and the host read (the JIT loop canary)."""
        return self._device.create_buffer(size=4, usage=self._usage)

    # -- dispatch (used by the JIT session and canonicalize) ------------------------------------
    def debug_wait(self, what: str, op: str | None) -> None:
        """Debug mode (TENFERRO_DEBUG_SYNC=1): wait after a launch, raise what it caused."""
        self.counters.add("debug_waits")
        try:
            self.queue.wait_idle()
        except self._wgpu.GPUError as exc:
            raise LaunchError(f"{what} failed on {self.name!r} (debug sync): {exc}", op=op) from exc

    def dispatch(
        self,
        pipeline: Pipeline,
        params: Any,
        buffers: Sequence[Any],
        physical: tuple[int, int, int],
        owners: Sequence[WebGpuStorage] | None = None,
    ) -> None:
        """Record one dispatch into the pending compute pass (submitted by the caller's rule).

        ``params`` is the uniform buffer (binding 0), ``buffers`` the storage buffers (1..n).
        With ``owners`` — the storages owning those of ``buffers`` that are not the runtime's
        own — the bind group comes from the cache, evicted when one of them is freed; without,
        it is made for this dispatch alone.
        """
        if owners is None:
            entries = [{"binding": 0, "resource": {"buffer": params}}]
            entries += [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers, 1)]
            group = self._device.create_bind_group(layout=pipeline.layout, entries=entries)
        else:
            group = self.bind_groups.get(pipeline.layout, params, buffers, owners)
        self.queue.record(pipeline.pipeline, group, physical)


__all__ = ["WebGpuExecSession", "WebGpuRuntime", "WebGpuStorage"]

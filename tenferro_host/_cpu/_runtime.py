"""The CPU runtime: numpy storage, its own allocation domain, always available.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> with cpu.session() as s:
...     ex = tf.cpu.exec_session(s)
...     ex.supports(tf.ExtensionCapability.JIT_KERNEL)
True
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import DType, OutOfMemoryError, Tensor, ValidationError, dtype
from ..provider import RECORDING, OpRecording, Runtime, Storage, compact_strides
from ._exec_session import CpuExecSession
from ._replay import CpuReplay
from ._storage import CpuStorage, numpy_view

if TYPE_CHECKING:
    from ..provider import BackendSession, ExecSession, HostServices


@dataclass(frozen=True)
class CpuDeviceInfo:
    """The host processor."""

    name: str
    cores: int


class CpuRuntime(Runtime):
    """A CPU runtime; work runs synchronously, so events are complete when recorded."""

    def __init__(self, host: HostServices, index: int = 0) -> None:
        super().__init__(host, "cpu", index)
        self._info = CpuDeviceInfo(platform.processor() or platform.machine(), os.cpu_count() or 1)

    @property
    def device(self) -> object:
        return "cpu"

    @property
    def device_info(self) -> CpuDeviceInfo:
        return self._info

    def new_exec_session(self, backend_session: BackendSession) -> ExecSession:
        return CpuExecSession(backend_session)

    def op_replay(self, recording: OpRecording) -> Any:
        """A recording of ``ex.launch`` calls into ``ex.alloc_output`` tensors, replayed."""
        return CpuReplay(self, recording)

    #: Set by the test kit (:func:`tenferro_host.testing.poison_fresh_memory`): fresh storage
    #: holds NaN (floats) or 0xA5 bytes (the rest), so reading an output before writing it shows.
    poison_fresh_memory: bool = False

    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        try:
            array = np.empty(nbytes // dt.itemsize, dtype=dt.numpy)
        except (MemoryError, ValueError) as exc:  # ValueError: beyond numpy's largest array
            raise OutOfMemoryError(
                f"cannot allocate {nbytes} bytes of host memory for {self.name}: {exc}",
                nbytes=nbytes,
                pool_stats=self.stats(),
            ) from exc
        if CpuRuntime.poison_fresh_memory:
            if dt.category in ("float", "complex"):
                array.fill(np.nan)
            else:
                array.view(np.uint8).fill(0xA5)
        return CpuStorage(self, array)

    def _write(self, storage: Storage, data: np.ndarray) -> None:
        assert isinstance(storage, CpuStorage)
        storage.array.view(np.uint8)[: data.nbytes] = data

    def _read(self, storage: Storage, byte_offset: int, nbytes: int) -> np.ndarray:
        assert isinstance(storage, CpuStorage)
        return storage.array.view(np.uint8)[byte_offset : byte_offset + nbytes].copy()

    def _fill_zero(self, storage: Storage) -> None:
        assert isinstance(storage, CpuStorage)
        storage.array.fill(0)

    def _copy_to_compact(self, src: Tensor, dst: Tensor) -> None:
        assert isinstance(dst.storage, CpuStorage)
        dst.storage.array[:] = numpy_view(src).reshape(-1, order="F")

    @staticmethod
    def strided_view(t: Tensor) -> np.ndarray:
        """A numpy view (no copy) of a CPU tensor with its shape and strides.

        Memory reached this way is outside what an op call records, so a call that takes one
        stays on the full path (``ex.launch`` is the seam a plan replays).
        """
        rec = RECORDING.rec
        if rec is not None:
            rec.refuse("it took a numpy view of a tensor outside ex.launch (strided_view)")
        return numpy_view(t)

    # -- DLPack ------------------------------------------------------------------------------
    def from_dlpack(self, x: Any) -> Tensor:
        """Import a CPU buffer; zero-copy unless its strides are negative or uneven."""
        if not hasattr(x, "__dlpack__"):
            raise ValidationError(
                f"from_dlpack needs an object with __dlpack__ (a numpy array, a CPU torch "
                f"tensor), got {type(x).__name__}",
                argument="x",
            )
        try:
            arr = np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:
            raise ValidationError(
                f"cannot import {type(x).__name__} through DLPack: {exc}; pass a native-byte-order "
                "CPU buffer (e.g. numpy.ascontiguousarray(x, dtype=x.dtype.newbyteorder('=')))",
                argument="x",
            ) from exc
        return self._import_array(arr)

    def _import_array(self, arr: np.ndarray) -> Tensor:
        """:meth:`from_dlpack` of a numpy array already imported (a framework's CPU bridge
        takes one from its tensor without the DLPack round trip)."""
        dt = self._check_dtype(_HOST_DTYPES.get(arr.dtype) or dtype(arr.dtype))
        isz = arr.itemsize
        byte_strides = arr.strides
        if byte_strides == (isz,) and arr.size:  # 1-D compact, the common import: itself
            storage = CpuStorage(self, arr, kind="imported", read_only=not arr.flags.writeable)
            return Tensor(storage, dt, arr.shape, (1,), 0, True)
        if arr.size and all(s >= 0 and s % isz == 0 for s in byte_strides):
            strides = tuple(s // isz for s in byte_strides)
            flags = arr.flags
            if flags.c_contiguous or flags.f_contiguous:
                flat = arr.ravel("K")  # a view of the same bytes, no Python frames
            else:
                hi = _byte_extent(arr)
                flat = np.lib.stride_tricks.as_strided(arr, shape=(hi // isz,), strides=(isz,))
            storage = CpuStorage(self, flat, kind="imported", read_only=not flags.writeable)
            return Tensor(storage, dt, tuple(arr.shape), strides, 0)
        copy = np.asfortranarray(arr)
        storage = CpuStorage(self, copy.reshape(-1, order="F"), kind="imported")
        return Tensor(storage, dt, tuple(arr.shape), compact_strides(arr.shape), 0)

    def export_dlpack(self, t: Tensor, stream: Any, **kwargs: Any) -> Any:
        if stream is not None:
            raise ValidationError(
                f"a CPU tensor has no stream to synchronize with; pass stream=None, got {stream!r}",
                argument="stream",
            )
        return self.strided_view(t).__dlpack__(stream=stream, **kwargs)

    def dlpack_device(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


#: numpy dtype -> host dtype, the import's lookup without ``dtype()``'s conversions
_HOST_DTYPES = {d.numpy: d for d in map(dtype, Runtime.supported_dtypes)}


def _byte_extent(arr: np.ndarray) -> int:
    """Bytes from the first element to the end of the last (non-negative strides)."""
    return sum((d - 1) * s for d, s in zip(arr.shape, arr.strides, strict=True)) + arr.itemsize


__all__ = ["CpuDeviceInfo", "CpuRuntime", "CpuStorage"]

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

from ..dtypes import DType, dtype
from ..errors import OutOfMemoryError, ValidationError
from ..layout import compact_strides
from ..provider._runtime import Runtime
from ..provider._storage import Storage
from ..tensor import Tensor

if TYPE_CHECKING:
    from ..provider._host_services import HostServices


@dataclass(frozen=True)
class CpuDeviceInfo:
    """The host processor."""

    name: str
    cores: int


class CpuStorage(Storage):
    """A flat numpy array; ``array`` has the dtype of the tensor that allocated it."""

    __slots__ = ("array",)

    def __init__(
        self, runtime: Runtime, array: np.ndarray, kind: str = "owned", read_only: bool = False
    ) -> None:
        super().__init__(runtime, array.nbytes, kind, read_only)
        self.array = array


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
        dst.storage.array[:] = self.strided_view(src).reshape(-1, order="F")

    @staticmethod
    def strided_view(t: Tensor) -> np.ndarray:
        """A numpy view (no copy) of a CPU tensor with its shape and strides."""
        if 0 in t.shape:
            return np.empty(t.shape, dtype=t.dtype.numpy)
        assert isinstance(t.storage, CpuStorage)
        whole = t.storage.array
        if (
            t.strides == (1,)
            and t.offset == 0
            and whole.shape == t.shape
            and whole.dtype is t.dtype.numpy
        ):
            return whole.view()  # a 1-D tensor of its whole storage: a plain view, no layout
        isz = t.dtype.itemsize
        # One C call (as_strided costs several Python frames); the buffer bounds are checked.
        return np.ndarray(
            t.shape,
            t.dtype.numpy,
            buffer=t.storage.array,
            offset=t.offset * isz,
            strides=tuple(map(isz.__mul__, t.strides)),  # element -> byte strides, in C
        )

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
        dt = self._check_dtype(dtype(arr.dtype))
        isz = arr.itemsize
        if arr.size and all(s >= 0 and s % isz == 0 for s in arr.strides):
            hi = _byte_extent(arr)
            flat = np.lib.stride_tricks.as_strided(arr, shape=(hi // isz,), strides=(isz,))
            strides = tuple(s // isz for s in arr.strides)
            storage = CpuStorage(self, flat, kind="imported", read_only=not arr.flags.writeable)
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


def _byte_extent(arr: np.ndarray) -> int:
    """Bytes from the first element to the end of the last (non-negative strides)."""
    return sum((d - 1) * s for d, s in zip(arr.shape, arr.strides, strict=True)) + arr.itemsize


__all__ = ["CpuDeviceInfo", "CpuRuntime", "CpuStorage"]

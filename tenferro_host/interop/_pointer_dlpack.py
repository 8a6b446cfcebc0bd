"""A framework's raw buffer (a pointer, a dtype, a shape) as a DLPack producer.

XLA hands an FFI handler bare pointers; :class:`PointerBuffer` gives one the ``__dlpack__``
protocol, so the host imports it with ``runtime.from_dlpack`` like any framework's tensor
(zero-copy, read-only when the buffer is an input). The capsule keeps nothing alive: the caller
keeps the memory valid while the import is used (XLA keeps a call's buffers for the call).
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..dtypes import DType
from ..layout import compact_strides
from ..provider import (
    DLPACK_FLAG_BITMASK_READ_ONLY,
    CapsuleDestructor,
    DLDevice,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLVersionedDeleter,
    capsule_is_valid,
    capsule_new,
    capsule_pointer,
    dl_dtype,
)

_NAME = b"dltensor_versioned"
#: address of a managed tensor -> what it points into (shape and strides arrays, the struct)
_LIVE: dict[int, Any] = {}


@DLVersionedDeleter
def _delete(managed: Any) -> None:
    _LIVE.pop(ctypes.addressof(managed.contents), None)


@CapsuleDestructor
def _destroy_capsule(capsule: int) -> None:
    obj = ctypes.cast(capsule, ctypes.py_object)
    if capsule_is_valid(obj, _NAME):  # never consumed: the deleter is ours to call
        _LIVE.pop(capsule_pointer(obj, _NAME), None)


class PointerBuffer:
    """``nbytes`` at ``address`` on DLPack device ``device`` as a compact column-major array."""

    __slots__ = ("address", "device", "dtype", "read_only", "shape")

    def __init__(
        self,
        address: int,
        dtype: DType,
        shape: tuple[int, ...],
        device: tuple[int, int],
        read_only: bool,
    ) -> None:
        self.address = address
        self.dtype = dtype
        self.shape = shape
        self.device = device
        self.read_only = read_only

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, stream: Any = None, max_version: Any = None, **kwargs: Any) -> Any:
        if max_version is None or tuple(max_version) < (1, 0):
            raise BufferError("PointerBuffer exports DLPack 1.0 capsules only")
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*compact_strides(self.shape))
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(1, 0)
        managed.deleter = _delete
        managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY if self.read_only else 0
        dl = managed.dl_tensor
        dl.data = self.address
        dl.device = DLDevice(*self.device)
        dl.ndim = ndim
        dl.dtype = dl_dtype(self.dtype)
        dl.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        dl.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        address = ctypes.addressof(managed)
        _LIVE[address] = (managed, shape, strides)
        return capsule_new(address, _NAME, _destroy_capsule)


__all__ = ["PointerBuffer"]

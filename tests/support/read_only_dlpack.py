"""A DLPack 1.0 producer that lends device memory read-only, built with ctypes.

CuPy cannot make a read-only array, so the tests wrap a pointer they own (a CuPy allocation on
the GPU, a runtime allocation on the simulated driver) in a versioned capsule whose flags carry
DLPACK_FLAG_BITMASK_READ_ONLY; ``deleted`` counts the producer's deleter calls.
"""

from __future__ import annotations

import ctypes
from typing import Any

from tenferro_host.provider import (
    DLPACK_FLAG_BITMASK_READ_ONLY,
    KDL_CUDA,
    CapsuleDestructor,
    DLDataType,
    DLDevice,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLVersionedDeleter,
    capsule_new,
)


class ReadOnlyFloat32:
    """``n`` float32 at device pointer ``ptr`` of CUDA device ``device``, exported read-only
    (``read_only=False`` exports the same memory writable, as a control)."""

    def __init__(self, ptr: int, n: int, device: int = 0, read_only: bool = True) -> None:
        self.ptr, self.n, self.device, self.read_only = ptr, n, device, read_only
        self.deleted = 0
        self.asked: list[Any] = []
        self._keep: list[Any] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CUDA, self.device)

    def __dlpack__(self, stream: Any = None, max_version: Any = None, **kwargs: Any) -> Any:
        self.asked.append(max_version)
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(1, 0)
        managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY if self.read_only else 0
        shape = (ctypes.c_int64 * 1)(self.n)
        dl = managed.dl_tensor
        dl.data = self.ptr
        dl.device = DLDevice(KDL_CUDA, self.device)
        dl.ndim = 1
        dl.dtype = DLDataType(2, 32, 1)
        dl.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        dl.strides = None
        dl.byte_offset = 0

        @DLVersionedDeleter
        def deleter(_: Any) -> None:
            self.deleted += 1

        managed.deleter = deleter
        self._keep.append((managed, shape, deleter))
        no_destructor = CapsuleDestructor(0)  # the consumer takes it (tests never leave one)
        return capsule_new(ctypes.addressof(managed), b"dltensor_versioned", no_destructor)

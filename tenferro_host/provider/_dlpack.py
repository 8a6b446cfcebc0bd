"""The DLPack C structs as ctypes, one definition for every producer and consumer of capsules.

DLPack is a C ABI: a capsule named ``dltensor`` holds a :class:`DLManagedTensor`, one named
``dltensor_versioned`` (DLPack 1.x) a :class:`DLManagedTensorVersioned`, whose ``flags`` can say
the memory is lent read-only. A backend that exports or imports device memory (the CUDA plugin)
and the host's own pointer producer (``tenferro_host.interop``) build the same structs from here.
"""

from __future__ import annotations

import ctypes

from ..dtypes import DType

#: DLPack device types (``DLDeviceType``) the host meets.
KDL_CPU, KDL_CUDA = 1, 2
#: DLPack type codes (``DLDataTypeCode``) by dtype category.
DL_TYPE_CODES = {"int": 0, "uint": 1, "float": 2, "complex": 5, "bool": 6}
#: ``DLManagedTensorVersioned.flags``: the consumer must not write the memory.
DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    """A pre-1.0 capsule's payload: no version, no flags (always writable)."""


#: The C type of a :class:`DLManagedTensor`'s deleter (decorate a callback with it).
DLDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DLDeleter),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """A DLPack 1.x capsule's payload: the version first, then flags before the tensor."""


#: The C type of a :class:`DLManagedTensorVersioned`'s deleter.
DLVersionedDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DLVersionedDeleter),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]


def dl_dtype(dt: DType) -> DLDataType:
    """The DLPack type of ``dt`` (one lane)."""
    return DLDataType(DL_TYPE_CODES[dt.category], dt.itemsize * 8, 1)


__all__ = [
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DL_TYPE_CODES",
    "KDL_CPU",
    "KDL_CUDA",
    "DLDataType",
    "DLDeleter",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackVersion",
    "DLTensor",
    "DLVersionedDeleter",
    "dl_dtype",
]

"""The DLPack C structs as ctypes, one definition for every producer and consumer of capsules.

DLPack is a C ABI: a capsule named ``dltensor`` holds a :class:`DLManagedTensor`, one named
``dltensor_versioned`` (DLPack 1.x) a :class:`DLManagedTensorVersioned`, whose ``flags`` can say
the memory is lent read-only. A backend that exports or imports device memory (the CUDA plugin)
and the host's own pointer producer (``tenferro_host.interop``) build the same structs from here,
and make and read capsules through this module's own prototypes of the capsule C API:
``ctypes.pythonapi.PyCapsule_New`` is one object per process whose ``argtypes`` other libraries
set (``jax.ffi.pycapsule`` sets a destructor type that refuses a ``c_void_p``).
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


#: The C type of a capsule's destructor: it receives the capsule's address (cast it with
#: ``ctypes.cast(address, ctypes.py_object)`` to pass it to the functions below).
CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
capsule_new = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, CapsuleDestructor
)(("PyCapsule_New", ctypes.pythonapi))
capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
#: The pointer a capsule of this name holds; raises ValueError for a capsule of another name.
capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi)
)


def dl_dtype(dt: DType) -> DLDataType:
    """The DLPack type of ``dt`` (one lane)."""
    return DLDataType(DL_TYPE_CODES[dt.category], dt.itemsize * 8, 1)


__all__ = [
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DL_TYPE_CODES",
    "KDL_CPU",
    "KDL_CUDA",
    "CapsuleDestructor",
    "DLDataType",
    "DLDeleter",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackVersion",
    "DLTensor",
    "DLVersionedDeleter",
    "capsule_is_valid",
    "capsule_new",
    "capsule_pointer",
    "capsule_set_name",
    "dl_dtype",
]

"""DLPack interop on CUDA (docs/contract.md), ordered by events — no stream is exported.

Export: ``tensor.__dlpack__(stream=s)`` makes the consumer's stream ``s`` wait on an event of
the runtime's stream and hands out a capsule that keeps the storage alive; when the consumer
calls the deleter, the runtime's stream waits on the consumer's stream before the storage can
be freed (stream-ordered). Import: ``backend.from_dlpack(x)`` asks the producer to order its
work before the runtime's stream (``x.__dlpack__(stream=runtime_stream, max_version=(1, 0))``,
falling back to an unversioned capsule for producers older than DLPack 1.0) and wraps the memory
as storage of kind "imported", read-only when the producer flags it READ_ONLY; once that storage
is collected, the producer's deleter runs from the retirement queue after the runtime's stream
has passed an event.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any

from tenferro_host import DType, DTypeError, ForeignRuntimeError, Tensor, ValidationError, dtype
from tenferro_host.provider import (
    DL_TYPE_CODES,
    DLPACK_FLAG_BITMASK_READ_ONLY,
    KDL_CPU,
    KDL_CUDA,
    CapsuleDestructor,
    DLDataType,
    DLDeleter,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    capsule_is_valid,
    capsule_new,
    capsule_pointer,
    capsule_set_name,
    dl_dtype,
)

from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._runtime import CudaRuntime

_NAMES = {code: name for name, code in DL_TYPE_CODES.items()}

_NAME = b"dltensor"
_USED = b"used_dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_USED_VERSIONED = b"used_dltensor_versioned"


# -- export ----------
class _Export:
    """What an exported capsule keeps alive: the tensor and the ctypes memory it points to."""

    def __init__(self, runtime: CudaRuntime, tensor: Tensor, consumer: int | None) -> None:
        self.runtime = runtime
        self.tensor = tensor
        self.consumer = consumer
        n = tensor.ndim
        self.shape = (ctypes.c_int64 * max(n, 1))(*tensor.shape)
        self.strides = (ctypes.c_int64 * max(n, 1))(*tensor.strides)
        self.managed = DLManagedTensor()


_exports: dict[int, _Export] = {}
_exports_lock = threading.Lock()


def _release(address: int) -> None:
    """The deleter: order the runtime's stream after the consumer's, then drop the tensor."""
    with _exports_lock:
        export = _exports.pop(address, None)
    if export is None:
        return
    rt = export.runtime
    try:
        if export.consumer is not None and not rt.closed:
            d = rt.driver
            with rt.primary:
                event = rt.ok(
                    d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate"
                )
                rt.ok(
                    d.cuEventRecord(event, d.CUstream(export.consumer)),
                    "cuEventRecord(DLPack consumer stream)",
                )
                rt.stream_wait(event)
                d.cuEventDestroy(event)
    except Exception:
        rt.deferred_errors += 1


@DLDeleter
def _deleter(managed: Any) -> None:
    _release(ctypes.addressof(managed.contents))


@CapsuleDestructor
def _capsule_destructor(capsule: int) -> None:
    obj = ctypes.cast(capsule, ctypes.py_object)
    if capsule_is_valid(obj, _NAME):  # never consumed: we delete it ourselves
        _release(capsule_pointer(obj, _NAME))


def _stream_like(stream: int) -> bool:
    """-1, 1, 2 or a value that can be a CUstream handle: the driver dereferences handles, and
    no stream lives in the first page of memory (5 would crash the driver, not fail)."""
    return stream in (-1, 1, 2) or 4096 <= stream < 1 << 64


def export(runtime: CudaRuntime, t: Tensor, stream: Any, **kwargs: Any) -> Any:
    """A DLPack capsule of ``t``; the consumer's ``stream`` waits on the runtime's stream."""
    if kwargs.get("copy") is True:
        raise BufferError("a tenferro CUDA tensor is exported without copying; copy it first")
    if t.storage.read_only:  # an unversioned capsule cannot say so: it would lend it writable
        raise BufferError(
            "the tensor is a read-only import, and this export would lend it "
            "writable; export the copy backend.canonicalize(t) makes"
        )
    dl_device = kwargs.get("dl_device")
    if dl_device is not None and tuple(dl_device) != (KDL_CUDA, runtime.index):
        raise BufferError(f"the tensor lives on CUDA device {runtime.index}, not {dl_device}")
    runtime.check_usable()
    if stream is None:
        consumer: int | None = 1  # the legacy default stream
    elif isinstance(stream, int) and not isinstance(stream, bool) and _stream_like(stream):
        consumer = None if stream == -1 else stream
    else:
        raise ValidationError(
            f"stream must be an int: a CUstream handle, 1 (legacy default), 2 (per-thread "
            f"default) or -1 (no ordering); got {stream!r} (DLPack disallows 0)",
            argument="stream",
        )
    if consumer is not None:
        d = runtime.driver
        event = runtime.record_event()
        runtime.ok(
            d.cuStreamWaitEvent(d.CUstream(consumer), event, 0),
            "cuStreamWaitEvent(DLPack consumer stream)",
        )
        runtime.recycle_event(event)
    exp = _Export(runtime, t, consumer)
    dl = exp.managed.dl_tensor
    dl.data = getattr(t.storage, "ptr", 0) or None
    dl.device = DLDevice(KDL_CUDA, runtime.index)
    dl.ndim = t.ndim
    dl.dtype = dl_dtype(t.dtype)
    dl.shape = ctypes.cast(exp.shape, ctypes.POINTER(ctypes.c_int64))
    dl.strides = ctypes.cast(exp.strides, ctypes.POINTER(ctypes.c_int64))
    dl.byte_offset = t.offset * t.dtype.itemsize
    exp.managed.deleter = _deleter
    address = ctypes.addressof(exp.managed)
    with _exports_lock:
        _exports[address] = exp
    return capsule_new(address, _NAME, _capsule_destructor)


# -- import ----------
def _dtype_of(dl: DLDataType) -> DType:
    name = _NAMES.get(dl.code)
    if name is None or dl.lanes != 1:
        raise DTypeError(f"DLPack dtype code {dl.code} x{dl.lanes} is not supported", argument="x")
    if name == "bool":
        return dtype("bool")
    try:
        return dtype(f"{name}{dl.bits}")
    except DTypeError as exc:
        raise DTypeError(
            f"DLPack dtype {name}{dl.bits} is not supported; convert it first", argument="x"
        ) from exc


def import_(runtime: CudaRuntime, x: Any) -> Tensor:
    """Wrap a CUDA buffer of this device (CuPy, torch, JAX ...) as an "imported" tensor."""
    if not hasattr(x, "__dlpack__"):
        raise ValidationError(f"{type(x).__name__} does not implement __dlpack__", argument="x")
    device_type, device_id = x.__dlpack_device__()
    if device_type == KDL_CPU:
        raise ForeignRuntimeError(
            f"{type(x).__name__} lives in host memory; upload it with {runtime.name!r}.upload"
        )
    if device_type != KDL_CUDA or device_id != runtime.index:
        raise ForeignRuntimeError(
            f"{type(x).__name__} lives on DLPack device ({device_type}, {device_id}), not on "
            f"CUDA device {runtime.index}; move it there first"
        )
    runtime.check_usable()
    managed, read_only = _take_capsule(x, int(runtime.stream_handle))
    dl = managed.dl_tensor
    try:
        dt = _dtype_of(dl.dtype)
    except DTypeError:
        call_deleter(managed)  # we own the capsule: give the buffer back before failing
        raise
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(dl.ndim))
    else:  # NULL strides: row-major compact
        acc, rev = 1, []
        for dim in reversed(shape):
            rev.append(acc)
            acc *= max(dim, 1)
        strides = tuple(reversed(rev))
    isz = dt.itemsize
    numel = 1
    for dim in shape:
        numel *= dim
    lo = sum(min(0, (dim - 1) * s) for dim, s in zip(shape, strides, strict=True)) if numel else 0
    hi = sum(max(0, (dim - 1) * s) for dim, s in zip(shape, strides, strict=True)) + 1
    base = (dl.data or 0) + dl.byte_offset + lo * isz
    if numel:
        anchor = (dl.data or 0) + dl.byte_offset  # element 0: inside the allocation
        _check_inside_allocation(runtime, anchor, base, (hi - lo) * isz, managed)
    storage = CudaStorage(
        runtime,
        base if numel else 0,
        (hi - lo) * isz if numel else 0,
        kind="imported",
        read_only=read_only,
        release=("dlpack", managed),  # the deleter runs when the storage dies
    )
    return Tensor(storage, dt, shape, strides, -lo)


def _take_capsule(x: Any, stream: int) -> tuple[Any, bool]:
    """The producer's managed tensor, now ours, and whether it is lent read-only.

    A DLPack 1.x capsule carries the READ_ONLY flag; a producer older than 1.0 rejects
    ``max_version`` with TypeError and hands out an unversioned (writable) capsule instead.
    """
    try:
        capsule = x.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:
        capsule = x.__dlpack__(stream=stream)
    if capsule_is_valid(capsule, _NAME_VERSIONED):
        address = capsule_pointer(capsule, _NAME_VERSIONED)
        capsule_set_name(capsule, _USED_VERSIONED)  # ours now: its destructor must not
        versioned = DLManagedTensorVersioned.from_address(address)
        if versioned.version.major != 1:
            call_deleter(versioned)
            raise ValidationError(
                f"{type(x).__name__} exported DLPack {versioned.version.major}."
                f"{versioned.version.minor}, which this host does not read (it asked for 1.0); "
                "export it as DLPack 1.x",
                argument="x",
            )
        return versioned, bool(versioned.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    address = capsule_pointer(capsule, _NAME)  # raises for a capsule of another name
    capsule_set_name(capsule, _USED)  # ours now: its destructor must not delete it
    return DLManagedTensor.from_address(address), False


def _check_inside_allocation(
    runtime: CudaRuntime, anchor: int, base: int, nbytes: int, managed: Any
) -> None:
    """The view's byte range must lie inside the producer's allocation (checked by the driver)."""
    d = runtime.driver
    with runtime.primary:
        result = d.cuMemGetAddressRange(anchor)
    if int(result[0]) != 0:
        return  # memory the driver cannot describe (e.g. host-registered): trust the producer
    start, size = int(result[1]), int(result[2])
    if base < start or base + nbytes > start + size:
        call_deleter(managed)
        raise ValidationError(
            f"the DLPack tensor's shape and strides reach bytes [{base:#x}, {base + nbytes:#x}) "
            f"outside its allocation [{start:#x}, {start + size:#x}); pass a well-formed view",
            argument="x",
        )


def call_deleter(managed: Any) -> None:
    """Run a producer's DLPack deleter (from the retirement queue); ``managed`` is its
    DLManagedTensor or DLManagedTensorVersioned."""
    if managed.deleter:
        managed.deleter(ctypes.pointer(managed))


__all__ = ["KDL_CUDA", "call_deleter", "export", "import_"]

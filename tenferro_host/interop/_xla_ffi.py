"""XLA's FFI C API (``xla/ffi/api/c_api.h``, API 0.x): a Python body as an FFI target's handler.

:func:`handler_capsule` gives the PyCapsule ``jax.ffi.register_ffi_target`` takes for a target
whose calls ``run(call)`` runs. Where the compiled call is built, the handler is C
(``provider/_ccall_xla.c``): one per platform for every target, which finds the body by the
call's string attribute ``target`` and decodes the call frame without a Python frame. Otherwise
(and as the reference) it is a ctypes callback over the structs mirrored here. Both answer XLA's
metadata query (API version, no traits: the handler is not command-buffer compatible, so XLA
never captures it into a CUDA graph it replays without Python), ignore the stages before
execution, and at execution hand the body a :class:`Call`: the buffers, the string attributes
and, on a GPU, XLA's stream and device. An exception becomes an XLA error carrying its message.
"""

from __future__ import annotations

import ctypes
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

import jax.ffi

from ..provider._compiled import COMPILED

_API_MAJOR, _API_MINOR = 0, 1  # the oldest minor whose call frame this module reads
_METADATA = 1  # XLA_FFI_Extension_Metadata
_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_STRING = 4  # XLA_FFI_AttrType_STRING
_ERROR_INTERNAL = 13
_ERROR_INVALID_ARGUMENT = 3

#: XLA_FFI_DataType -> host dtype name
DTYPES = {
    1: "bool",
    4: "int32",
    5: "int64",
    8: "uint32",
    10: "float16",
    11: "float32",
    12: "float64",
    15: "complex64",
    18: "complex128",
}

_void_p = ctypes.c_void_p
_size_t = ctypes.c_size_t


class _ExtensionBase(ctypes.Structure):
    pass


_ExtensionBase._fields_ = [
    ("struct_size", _size_t),
    ("type", ctypes.c_int),
    ("next", ctypes.POINTER(_ExtensionBase)),
]


class _ApiVersion(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("major_version", ctypes.c_int),
        ("minor_version", ctypes.c_int),
    ]


class _Metadata(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("api_version", _ApiVersion),
        ("traits", ctypes.c_uint32),
        ("state_type_id", ctypes.c_int64),
    ]


class _MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", _ExtensionBase), ("metadata", ctypes.POINTER(_Metadata))]


class _Buffer(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("dtype", ctypes.c_int),
        ("data", _void_p),
        ("rank", ctypes.c_int64),
        ("dims", ctypes.POINTER(ctypes.c_int64)),
    ]


class _List(ctypes.Structure):
    """XLA_FFI_Args and XLA_FFI_Rets: the same layout."""

    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("size", ctypes.c_int64),
        ("types", ctypes.POINTER(ctypes.c_int)),
        ("items", ctypes.POINTER(_void_p)),
    ]


class _ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", _size_t)]


class _Attrs(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("size", ctypes.c_int64),
        ("types", ctypes.POINTER(ctypes.c_int)),
        ("names", ctypes.POINTER(ctypes.POINTER(_ByteSpan))),
        ("attrs", ctypes.POINTER(_void_p)),
    ]


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("message", ctypes.c_char_p),
        ("errc", ctypes.c_int),
    ]


class _DeviceOrdinalGetArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("ctx", _void_p),
        ("device_ordinal", ctypes.c_int32),
    ]


class _StreamGetArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("ctx", _void_p),
        ("stream", _void_p),
    ]


_ApiFunction = ctypes.CFUNCTYPE(_void_p, _void_p)
_UNUSED_API = (
    "type_register",
    "execution_context_get",
    "state_set",
    "state_get",
    "device_memory_allocate",
    "device_memory_free",
    "thread_pool_schedule",
    "thread_pool_num_threads",
    "future_create",
    "future_set_available",
    "future_set_error",
    "run_id_get",
)


class _Api(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", _void_p),
        ("api_version", _ApiVersion),
        ("internal_api", _void_p),
        ("error_create", _ApiFunction),
        ("error_get_message", _void_p),
        ("error_destroy", _void_p),
        ("handler_register", _void_p),
        ("stream_get", _ApiFunction),
        *((name, _void_p) for name in _UNUSED_API),
        ("device_ordinal_get", _ApiFunction),
    ]


class _CallFrame(ctypes.Structure):
    _fields_ = [
        ("struct_size", _size_t),
        ("extension_start", ctypes.POINTER(_ExtensionBase)),
        ("api", ctypes.POINTER(_Api)),
        ("ctx", _void_p),
        ("stage", ctypes.c_int),
        ("args", _List),
        ("rets", _List),
        ("attrs", _Attrs),
    ]


def _struct_size(cls: type[ctypes.Structure]) -> int:
    """XLA_FFI_STRUCT_SIZE: up to the end of the last field (no trailing padding)."""
    name, kind = cls._fields_[-1][:2]
    return int(getattr(cls, name).offset + ctypes.sizeof(kind))


class BufferView(NamedTuple):
    """One argument or result buffer: its host dtype name, dims and device address."""

    dtype: str
    shape: tuple[int, ...]
    address: int


class Call(NamedTuple):
    """One execution of a target: its buffers, its string attributes, and on a GPU XLA's stream
    (a handle) and device (0 and 0 on the CPU)."""

    args: tuple[BufferView, ...]
    rets: tuple[BufferView, ...]
    attrs: dict[str, str]
    stream: int
    device: int


def _stream(api: Any, ctx: int) -> int:
    """XLA's stream for this call (``XLA_FFI_Stream_Get``)."""
    args = _StreamGetArgs(_struct_size(_StreamGetArgs), None, ctx, None)
    if api.stream_get(ctypes.addressof(args)):
        raise RuntimeError("XLA_FFI_Stream_Get failed (is this a GPU target?)")
    return int(args.stream or 0)


def _device(api: Any, ctx: int) -> int:
    """The device this call runs on (0 on an XLA older than ``XLA_FFI_DeviceOrdinal_Get``)."""
    if api.struct_size < _struct_size(_Api):
        return 0  # one device
    args = _DeviceOrdinalGetArgs(_struct_size(_DeviceOrdinalGetArgs), None, ctx, 0)
    if api.device_ordinal_get(ctypes.addressof(args)):
        raise RuntimeError("XLA_FFI_DeviceOrdinal_Get failed")
    return int(args.device_ordinal)


_BufferP = ctypes.POINTER(_Buffer)


def _buffers(items: _List) -> tuple[BufferView, ...]:
    out = []
    for i in range(items.size):
        b = ctypes.cast(items.items[i], _BufferP).contents
        name = DTYPES.get(b.dtype)
        if name is None:
            raise TypeError(f"XLA dtype code {b.dtype} has no host dtype")
        rank = b.rank
        out.append(BufferView(name, tuple(b.dims[:rank]) if rank else (), b.data or 0))
    return tuple(out)


def _attributes(attrs: _Attrs) -> dict[str, str]:
    out = {}
    for i in range(attrs.size):
        span = attrs.names[i].contents
        name = ctypes.string_at(span.ptr, span.len).decode()
        if attrs.types[i] != _STRING:
            raise TypeError(f"attribute {name!r} is not a string; the bridge passes strings only")
        value = ctypes.cast(attrs.attrs[i], ctypes.POINTER(_ByteSpan)).contents
        out[name] = ctypes.string_at(value.ptr, value.len).decode()
    return out


def _error(api: Any, message: str, code: int) -> int:
    args = _ErrorCreateArgs(_struct_size(_ErrorCreateArgs), None, message.encode(), code)
    return int(api.error_create(ctypes.addressof(args)) or 0)


_Handler = ctypes.CFUNCTYPE(_void_p, ctypes.POINTER(_CallFrame))


def _answered(run: Callable[[Call], None]) -> Callable[[Call], tuple[str, int] | None]:
    """``run`` as a handler's body: None when it returned, else (XLA's error message, its code)."""

    def body(call: Call) -> tuple[str, int] | None:
        try:
            run(call)
        except Exception as exc:  # noqa: BLE001 - handed to XLA as its error
            code = _ERROR_INVALID_ARGUMENT if isinstance(exc, ValueError) else _ERROR_INTERNAL
            return "".join(traceback.format_exception_only(exc)).strip(), code
        return None

    return body


def handler_capsule(target: str, run: Callable[[Call], None], gpu: bool) -> tuple[Any, Any]:
    """(capsule for ``jax.ffi.register_ffi_target`` of FFI target ``target`` on the GPU or CPU
    platform, what to keep alive as long as the target). The call must carry the string
    attribute ``target`` (the compiled handler finds ``run`` by it)."""
    body = _answered(run)
    if COMPILED is not None:
        return jax.ffi.pycapsule(COMPILED.xla_handler(target, gpu, body)), body

    def handle(frame_p: Any) -> int:
        frame = frame_p.contents
        ext = frame.extension_start
        if ext and ext.contents.type == _METADATA:
            meta = ctypes.cast(ext, ctypes.POINTER(_MetadataExtension)).contents.metadata.contents
            meta.api_version.major_version = _API_MAJOR
            meta.api_version.minor_version = _API_MINOR
            meta.traits = 0
            return 0
        if frame.stage != _EXECUTE:
            return 0
        api = frame.api.contents
        try:
            ctx = frame.ctx
            placed = (_stream(api, ctx), _device(api, ctx)) if gpu else (0, 0)
            call = Call(
                _buffers(frame.args), _buffers(frame.rets), _attributes(frame.attrs), *placed
            )
        except Exception as exc:  # noqa: BLE001 - handed to XLA as its error
            return _error(api, f"{type(exc).__name__}: {exc}", _ERROR_INTERNAL)
        answer = body(call)
        return 0 if answer is None else _error(api, *answer)

    callback = _Handler(handle)
    return jax.ffi.pycapsule(ctypes.cast(callback, _void_p).value), callback


if COMPILED is not None:
    COMPILED.xla_configure(Call, BufferView, DTYPES)

__all__ = ["DTYPES", "BufferView", "Call", "handler_capsule"]

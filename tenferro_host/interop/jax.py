"""Ops as JAX primitives through ``jax.ffi``: ``export("ext_add_kernel.add")(x, y)``.

Each op becomes an XLA FFI target (``tenferro_host.<op>``) whose handler runs the op's variant
in a session of the host on XLA's buffers: the cpu variant on the CPU platform, the CUDA one on
XLA's stream on a GPU (``ex.wait_external`` / ``ex.signal_external`` order the host's stream
between XLA's work, no host synchronization). Result shapes and dtypes come from the op's rules;
buffers are column-major (requested through the call's layouts), the host's compact layout.

Inputs are imported zero-copy and read-only. Results: while the variant runs, an allocation of
exactly a result's dtype and size is XLA's result buffer, so the common op writes its output in
place; a result that ended elsewhere (a workspace took the buffer, a view, a cached constant) is
copied into XLA's buffer on the device, after the variant.

``vmap`` goes through ``jax.ffi.ffi_call``'s ``vmap_method`` (``"sequential"`` by default: one
call per batch element, right for every op; ``"broadcast_all"`` for elementwise ops).

The handler is a ctypes callback into Python (``_xla_ffi``): each call takes the GIL and decodes
the call frame in Python, so it costs tens of microseconds more than a compiled handler; under
``jax.jit`` it is still one custom call in the compiled program, with no host round trip of
the data (``jax.pure_callback`` would copy GPU buffers to the host and back).

>>> import numpy as np, jax, jax.numpy as jnp
>>> from tenferro_host.interop import jax as tf_jax
>>> add = tf_jax.export("ext_add_kernel.add")
>>> np.asarray(jax.jit(add)(jnp.ones(3), jnp.ones(3))).tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import ast
import functools
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from ..dtypes import DType, dtype
from ..errors import ValidationError
from ..layout import is_compact
from ..provider import KDL_CPU, KDL_CUDA
from ._bridge import ExportedOp, ForeignStream, OutputAllocator, as_tuple
from ._hosts import default_host
from ._pointer_dlpack import PointerBuffer
from ._xla_ffi import BufferView, Call, handler_capsule

if TYPE_CHECKING:
    from .._host import Host
    from ..provider._runtime import Runtime
    from ..tensor import Tensor

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_LOCK = threading.Lock()
_EXPORTS: dict[str, JaxOp] = {}


@functools.lru_cache(maxsize=1024)
def _literal(text: str) -> dict[str, Any]:
    value = ast.literal_eval(text)
    assert isinstance(value, dict)
    return value


def _major_to_minor(ndim: int) -> tuple[int, ...]:
    """The column-major layout in ``ffi_call``'s terms (axes listed major to minor)."""
    return tuple(reversed(range(ndim)))


class JaxOp:
    """One op as a JAX function backed by an FFI target; call it with JAX arrays."""

    def __init__(self, host: Host, name: str, vmap_method: str) -> None:
        self.op = ExportedOp(host, name)
        self.host = host
        self.vmap_method = vmap_method
        self.target = f"tenferro_host.{name}"
        capsule, cpu_callback = handler_capsule(functools.partial(self._execute, gpu=False))
        self._callbacks = [cpu_callback]  # ctypes callbacks live as long as their targets
        jax.ffi.register_ffi_target(self.target, capsule, platform="cpu")
        if _has_cuda():
            capsule, gpu_callback = handler_capsule(functools.partial(self._execute, gpu=True))
            self._callbacks.append(gpu_callback)
            jax.ffi.register_ffi_target(self.target, capsule, platform="CUDA")

    def __repr__(self) -> str:
        return f"<JaxOp {self.target}>"

    def __call__(self, *arrays: Any, **attrs: Any) -> Any:
        """The op on JAX arrays (traced under ``jit``/``vmap``); attributes by keyword."""
        op = self.op
        if len(arrays) != len(op.inputs):
            raise ValidationError(
                f"op {op.name!r} takes {len(op.inputs)} arrays ({', '.join(op.inputs)}), "
                f"got {len(arrays)}",
                argument="arrays",
                op=op.name,
            )
        op.encode_attributes(attrs)  # refuses unknown attributes
        types = op.output_types(
            [dtype(np.dtype(a.dtype)) for a in arrays], [tuple(a.shape) for a in arrays], attrs
        )
        results = [jax.ShapeDtypeStruct(shape, dt.numpy) for dt, shape in types]
        call = jax.ffi.ffi_call(
            self.target,
            results,
            vmap_method=self.vmap_method,
            input_layouts=[_major_to_minor(np.ndim(a)) for a in arrays],
            output_layouts=[_major_to_minor(len(shape)) for _, shape in types],
        )
        out = call(*arrays, attrs=repr(attrs))
        return out[0] if len(types) == 1 else tuple(out)

    # -- the FFI handler -------------------------------------------------------------------------
    def _execute(self, call: Call, gpu: bool) -> None:
        attrs = _literal(call.attrs["attrs"])
        if gpu:
            stream = ForeignStream(call.stream())
            ordinal = call.device_ordinal()
            runtime = self.op.runtime(f"cuda:{ordinal}")
            device = (KDL_CUDA, ordinal)
        else:
            runtime = self.op.runtime("cpu")
            device = (KDL_CPU, 0)
        with runtime.session() as s:
            ex = s.exec_session()
            if gpu:
                ex.wait_external(stream)
            inputs = [runtime.from_dlpack(_pointer(b, device, True)) for b in call.args]
            claims = _Claims(call.rets, device)
            with OutputAllocator(runtime, claims.take) as allocator:
                result = ex.run(self.op.name, *inputs, **attrs)
            outs = as_tuple(result, len(call.rets))
            sources = [
                _source(runtime, out, ret, allocator.buffer_of(out.storage))
                for out, ret in zip(outs, call.rets, strict=True)
            ]
            for source, ret in zip(sources, call.rets, strict=True):
                if source is not None:  # a device copy, after the variant (stream-ordered)
                    target = runtime.from_dlpack(_pointer(ret, device, False))
                    runtime._copy_to_compact(source, target)
            if gpu:
                ex.signal_external(stream)


def _pointer(b: BufferView, device: tuple[int, int], read_only: bool) -> PointerBuffer:
    return PointerBuffer(b.address, dtype(b.dtype), b.shape, device, read_only)


class _Claims:
    """XLA's result buffers, each handed to the first allocation of its dtype and size."""

    def __init__(self, rets: Sequence[BufferView], device: tuple[int, int]) -> None:
        self._free = list(rets)
        self._device = device

    def take(self, nbytes: int, dt: DType) -> PointerBuffer | None:
        for i, ret in enumerate(self._free):
            if ret.dtype == dt.name and int(np.prod(ret.shape)) * dt.itemsize == nbytes:
                del self._free[i]
                return PointerBuffer(ret.address, dt, (nbytes // dt.itemsize,), self._device, False)
        return None


def _source(runtime: Runtime, out: Tensor, ret: BufferView, buffer: Any) -> Tensor | None:
    """What to copy into XLA's result buffer ``ret`` for output ``out``: None when the variant
    wrote it there; an output lying in another of XLA's result buffers is first made compact
    elsewhere, so no copy into a result buffer overwrites an output still to be copied."""
    if out.numel == 0:
        return None
    if not isinstance(buffer, PointerBuffer):
        return out
    if buffer.address == ret.address and out.offset == 0 and is_compact(out.shape, out.strides):
        return None
    return runtime.canonicalize(out)


def _has_cuda() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


def export(name: str, *, host: Host | None = None, vmap_method: str = "sequential") -> JaxOp:
    """Op ``name`` as a JAX function (an FFI target registered once per process)."""
    if vmap_method not in VMAP_METHODS:
        raise ValidationError(
            f"vmap_method must be one of {', '.join(VMAP_METHODS)}, got {vmap_method!r}",
            argument="vmap_method",
            op=name,
        )
    host = default_host() if host is None else host
    with _LOCK:
        found = _EXPORTS.get(name)
        if found is not None:
            if found.host is not host or found.vmap_method != vmap_method:
                raise ValidationError(
                    f"op {name!r} is already exported to JAX for another Host or vmap_method "
                    f"({found.vmap_method!r}); an FFI target is global to the process",
                    argument="host",
                    op=name,
                )
            return found
        exported = _EXPORTS[name] = JaxOp(host, name, vmap_method)
        return exported


__all__ = ["VMAP_METHODS", "JaxOp", "export"]

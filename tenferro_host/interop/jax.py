"""Ops as JAX primitives through ``jax.ffi``: ``export("ext_add_kernel.add")(x, y)``.

Each op becomes an XLA FFI target (``tenferro_host.<op>``) whose handler runs the op's variant
in a session of the host on XLA's buffers: the cpu variant on the CPU platform, the CUDA one on
XLA's stream on a GPU (``ex.wait_external`` / ``ex.signal_external`` order the host's stream
between XLA's work, no host synchronization). Result shapes and dtypes come from the op's rules;
buffers are column-major (requested through the call's layouts), the host's compact layout.

Inputs are imported zero-copy and read-only (on the CPU as numpy views of XLA's buffers, where
the op handle's call runs outside a session, so a planned call replays). Results: while the
variant runs, an allocation of exactly a result's dtype and size is XLA's result buffer, so the
common op writes its output in place; a result that ended elsewhere (a workspace took the
buffer, a view, a cached constant) is copied into XLA's buffer on the device, after the variant.

Under JAX's autodiff (a traced input), the call is a ``jax.custom_vjp`` running the op's declared
backward (``OpSpec.backward``), or, for an op that declares none, a ``custom_jvp`` whose rule
raises ``UnsupportedError``: never a zero gradient. Inputs are arrays (JAX's or numpy's); a
Python scalar is a ``DTypeError`` saying what to pass.

``vmap`` goes through ``jax.ffi.ffi_call``'s ``vmap_method`` (``"sequential"`` by default: one
call per batch element, right for every op; ``"broadcast_all"`` for elementwise ops).

The handler takes the GIL and hands the op's body a ``Call`` decoded from XLA's call frame: in C
where the compiled call is built (``provider/_ccall_xla.c``), else through ctypes
(``_xla_ffi``); under ``jax.jit`` it is one custom call in the compiled program, with no host
round trip of the data (``jax.pure_callback`` would copy GPU buffers to the host and back).

>>> import numpy as np, jax, jax.numpy as jnp
>>> from tenferro_host.interop import jax as tf_jax
>>> add = tf_jax.export("ext_add_kernel.add")
>>> np.asarray(jax.jit(add)(jnp.ones(3), jnp.ones(3))).tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import ast
import ctypes
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import jax
import numpy as np

from ..dtypes import ALL, DType, dtype
from ..errors import DTypeError, ValidationError
from ..layout import is_compact
from ._autograd import no_backward, run_backward
from ._bridge import (
    Exports,
    OutputAllocator,
    as_tuple,
    column_major_strides,
    launch_on_stream,
    run_on_stream,
)
from ._xla_ffi import BufferView, Call, handler_capsule

if TYPE_CHECKING:
    from .._cpu._runtime import CpuRuntime
    from .._host import Host
    from ..provider._runtime import Runtime
    from ..provider._storage import Storage
    from ..tensor import Tensor
    from ._bridge import ExportedOp

#: host dtype by name: the dtypes of XLA's buffers (``_xla_ffi.DTYPES``' names)
_DTYPES = {d.name: d for d in ALL}
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_EXPORTS: Exports[JaxOp] = Exports(
    "JAX", "vmap_method", VMAP_METHODS, "an FFI target is global to the process"
)


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

    def __init__(self, op: ExportedOp, vmap_method: str) -> None:
        self.op = op
        self.host = op.host
        self.vmap_method = vmap_method
        self.target = f"tenferro_host.{op.name}"
        capsule, cpu_callback = handler_capsule(self.target, self._execute_cpu, False)
        self._callbacks = [cpu_callback]  # the handlers' bodies live as long as their targets
        jax.ffi.register_ffi_target(self.target, capsule, platform="cpu")
        if _has_cuda():
            capsule, gpu_callback = handler_capsule(self.target, self._execute, True)
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
        for name, a in zip(op.inputs, arrays, strict=True):
            if not (hasattr(a, "dtype") and hasattr(a, "shape")):
                raise DTypeError(
                    f"op {op.name!r}: input {name!r} is a {type(a).__name__}, not an array; "
                    "pass a JAX or numpy array of one of the op's dtypes "
                    f"({', '.join(op.spec.signature.dtypes)}), e.g. "
                    f"jnp.asarray(value, dtype=jnp.{op.spec.signature.dtypes[0]})",
                    op=op.name,
                )
        op.encode_attributes(attrs)  # refuses unknown attributes
        if not any(isinstance(a, jax.core.Tracer) for a in arrays):
            return self._forward(arrays, attrs)  # no transformation: nothing to differentiate
        return self._differentiable(attrs)(*arrays)

    def _differentiable(self, attrs: dict[str, Any]) -> Callable[..., Any]:
        """The op under JAX's autodiff, for a call with ``attrs`` (static: closed over): a
        ``custom_vjp`` running the op's declared backward, or, for an op that declares none, a
        ``custom_jvp`` whose rule raises the typed error (forward and reverse mode alike).
        Forward use under ``jit``/``vmap`` is the plain FFI call."""
        op = self.op

        def forward(*arrays: Any) -> Any:
            return self._forward(arrays, attrs)

        forward.__name__ = op.name  # what a jaxpr shows
        if op.spec.backward is None:
            refusing = jax.custom_jvp(forward)

            def refuse(primals: Any, tangents: Any) -> Any:
                raise no_backward(op.name, "JAX")

            refusing.defjvp(refuse)
            return refusing
        differentiable = jax.custom_vjp(forward)

        def forward_saving(*arrays: Any) -> Any:
            out = self(*arrays, **attrs)  # differentiable in turn (reverse over reverse)
            return out, (arrays, out)

        def backward(saved: Any, cotangents: Any) -> tuple[Any, ...]:
            arrays, out = saved
            many = len(op.outputs) > 1
            return run_backward(
                op.spec,
                "JAX",
                self._sibling,
                arrays,
                out if many else (out,),
                cotangents if many else (cotangents,),
                attrs,
            )

        differentiable.defvjp(forward_saving, backward)
        return differentiable

    def _sibling(self, name: str) -> JaxOp:
        """Op ``name`` as a JAX function of this op's host (what a backward calls)."""
        found = _EXPORTS.get(name)
        if found is not None and found.host is self.host:
            return found  # whatever its vmap_method
        return export(name, host=self.host)

    def _forward(self, arrays: Sequence[Any], attrs: dict[str, Any]) -> Any:
        """The FFI call of the op on ``arrays`` (checked by :meth:`__call__`)."""
        op = self.op
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
        out = call(*arrays, attrs=repr(attrs), target=self.target)  # (the handler's body by it)
        return out[0] if len(types) == 1 else tuple(out)

    # -- the FFI handler -------------------------------------------------------------------------
    def _execute(self, call: Call) -> None:
        """On a GPU, on XLA's stream: the prepared call where the key is planned, else the op
        handle's call on XLA's buffers borrowed, the results written into XLA's buffers."""
        attrs = _literal(call.attrs["attrs"])
        runtime = self.op.runtime(f"cuda:{call.device}")
        stream = call.stream
        if _prepared(self.op, runtime, stream, call, attrs):
            return None
        inputs = [_borrowed(runtime, b, True) for b in call.args]
        claims = _Claims(call.rets, lambda ret, dt, n: (ret, dt, n))

        def import_buffer(claim: tuple[BufferView, DType, int]) -> Storage:
            ret, dt, n = claim
            return runtime.borrow(ret.address, dt, (n,), (1,)).storage

        allocator = OutputAllocator(runtime, claims.take, import_buffer)
        run_on_stream(
            self.op,
            runtime,
            stream,
            inputs,
            attrs,
            allocator,
            capturing=False,  # no command-buffer trait: XLA never captures the handler
            then=lambda results: _fill_results(
                runtime,
                results,
                claims,
                allocator,
                lambda r: _borrowed(runtime, r, False),
            ),
        )

    def _execute_cpu(self, call: Call) -> None:
        """On JAX's CPU platform: XLA's buffers as numpy arrays (no DLPack capsule) and the op
        handle's call outside a session, so a planned call replays into XLA's result buffer."""
        attrs = _literal(call.attrs["attrs"])
        runtime = cast("CpuRuntime", self.op.runtime("cpu"))
        if _prepared(self.op, runtime, None, call, attrs):
            return None
        inputs = [
            runtime._import_array(_host_array(b.address, dtype(b.dtype), b.shape, True))
            for b in call.args
        ]
        claims = _Claims(call.rets, lambda ret, dt, n: _host_array(ret.address, dt, (n,), False))

        def import_buffer(array: np.ndarray) -> Storage:
            return runtime._import_array(array).storage

        with OutputAllocator(runtime, claims.take, import_buffer) as allocator:
            result = self.op.call(runtime, inputs, attrs)
        _fill_results(
            runtime,
            as_tuple(result, len(call.rets)),
            claims,
            allocator,
            lambda r: runtime._import_array(_host_array(r.address, dtype(r.dtype), r.shape, False)),
        )


def _prepared(
    op: ExportedOp, runtime: Runtime, stream: int | None, call: Call, attrs: dict[str, Any]
) -> bool:
    """The call as its prepared replay on XLA's buffers (``stream``: XLA's CUDA stream, None on
    the CPU), where the op handle planned the key they give as borrowed inputs and the replay's
    outputs are XLA's result buffers (dtype, shape, column-major): the launches on their memory
    (addresses on a GPU, between the streams; numpy views on the CPU), nothing allocated or
    copied. False: the call's own path."""
    args, rets = call.args, call.rets
    if not args:
        return False
    key: tuple[Any, ...] = ()
    for b in args:
        key += (_DTYPES[b.dtype], b.shape, column_major_strides(b.shape), 0, runtime)
    plan = op.prepared(key, attrs)
    if plan is None or len(plan.outputs) != len(rets):
        return False
    for (_, (dt, shape, strides, _, _)), ret in zip(plan.outputs, rets, strict=True):
        if dt.name != ret.dtype or shape != ret.shape or strides != column_major_strides(shape):
            return False
    if stream is not None:
        inputs = tuple(b.address for b in args)
        return launch_on_stream(runtime, stream, plan, inputs, tuple(r.address for r in rets))
    arrays = tuple(_host_array(b.address, _DTYPES[b.dtype], b.shape, True) for b in args)
    outs = tuple(_host_array(r.address, _DTYPES[r.dtype], r.shape, False) for r in rets)
    return plan.launch_buffers(arrays, outs)


def _fill_results(
    runtime: Runtime,
    results: tuple[Tensor, ...],
    claims: _Claims,
    allocator: OutputAllocator,
    target: Callable[[BufferView], Tensor],
) -> None:
    """Copy into XLA's result buffers the results the variant did not write there (``target``:
    a result buffer as a host tensor of ``runtime``)."""
    rets = claims.rets
    sources = [
        _source(runtime, out, ret, claims.ret_of(allocator.buffer_of(out.storage)))
        for out, ret in zip(results, rets, strict=True)
    ]
    for source, ret in zip(sources, rets, strict=True):
        if source is not None:  # a device copy, after the variant (stream-ordered)
            runtime._copy_to_compact(source, target(ret))


def _borrowed(runtime: Runtime, b: BufferView, read_only: bool) -> Tensor:
    """XLA's device buffer ``b`` (column-major) as a tensor of ``runtime``; XLA keeps it for the
    call."""
    shape = b.shape
    return runtime.borrow(
        b.address, dtype(b.dtype), shape, column_major_strides(shape), None, read_only
    )


def _host_array(address: int, dt: DType, shape: tuple[int, ...], read_only: bool) -> np.ndarray:
    """XLA's CPU buffer at ``address`` as a column-major numpy array: one ctypes view of its
    bytes, no DLPack capsule. XLA keeps the buffer for the call."""
    count = math.prod(shape)
    if count == 0:
        return np.empty(shape, dt.numpy, order="F")
    raw = (ctypes.c_char * (count * dt.itemsize)).from_address(address)
    array = np.ndarray(shape, dt.numpy, buffer=raw, order="F")  # type: ignore[arg-type]  # a buffer
    if read_only:
        array.flags.writeable = False
    return array


class _Claims:
    """XLA's result buffers, each handed to the first allocation of its dtype and size
    (``view(ret, dt, n)``: the buffer as ``n`` flat elements of ``dt``, for the runtime)."""

    def __init__(
        self, rets: Sequence[BufferView], view: Callable[[BufferView, DType, int], Any]
    ) -> None:
        self.rets = rets
        self._free = list(rets)
        self._view = view
        #: id(buffer handed out) -> (the buffer, its result): the buffer kept so its id stays
        self._taken: dict[int, tuple[Any, BufferView]] = {}

    def take(self, nbytes: int, dt: DType) -> Any:
        for i, ret in enumerate(self._free):
            if ret.dtype == dt.name and math.prod(ret.shape) * dt.itemsize == nbytes:
                del self._free[i]
                buffer = self._view(ret, dt, nbytes // dt.itemsize)
                self._taken[id(buffer)] = (buffer, ret)
                return buffer
        return None

    def ret_of(self, buffer: Any) -> BufferView | None:
        """The result whose memory ``buffer`` (from :meth:`take`) is, else None."""
        entry = self._taken.get(id(buffer)) if buffer is not None else None
        return None if entry is None or entry[0] is not buffer else entry[1]


def _source(
    runtime: Runtime, out: Tensor, ret: BufferView, held: BufferView | None
) -> Tensor | None:
    """What to copy into XLA's result buffer ``ret`` for output ``out`` (``held``: the result
    buffer it was written to, if any): None when the variant wrote it there; an output lying in
    another of XLA's result buffers is first made compact elsewhere, so no copy into a result
    buffer overwrites an output still to be copied."""
    if out.numel == 0:
        return None
    if held is None:
        return out
    if held is ret and out.offset == 0 and is_compact(out.shape, out.strides):
        return None
    return runtime.canonicalize(out)


def _has_cuda() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


def export(name: str, *, host: Host | None = None, vmap_method: str = "sequential") -> JaxOp:
    """Op ``name`` as a JAX function (an FFI target registered once per process)."""
    return _EXPORTS.once(name, host, vmap_method, lambda op: JaxOp(op, vmap_method))


__all__ = ["VMAP_METHODS", "JaxOp", "export"]

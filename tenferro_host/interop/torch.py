"""Ops as torch operators: ``export("pkg.op")`` makes the operator ``torch.ops.tf_pkg.op``.

The schema comes from the op's ``Signature`` (tensors positionally, attributes by keyword, each
optional: left out, the variant's default applies; an ``object`` attribute such as a tuple of
axes travels as ``str``, the Python literal of its value), the fake kernel from its dtype and
shape rules, and the CPU and CUDA kernels run the op's variant in a session of the host on
torch's tensors:

* inputs are imported zero-copy: on the CPU through torch's numpy view, on CUDA through
  ``runtime.from_dlpack``, whose import orders torch's current stream before the host's stream,
  and ``ex.signal_external`` orders torch's current stream after the variant's launches: no
  host synchronization;
* on the CPU the call is the op handle's (``host.op``) outside a session, so a call whose key
  is planned replays, allocating its outputs through torch as the full path does;
* outputs are torch's: while the variant runs, the runtime allocates through torch
  (``torch.empty``, on the current stream), so the tensor the variant writes is the tensor torch
  gets back. Outputs are column-major (the host's compact layout) and the fake kernel says so.
  An output that is not one of those allocations (a view of an input, a cached constant) or not
  compact is copied into a fresh torch tensor: torch forbids outputs aliasing inputs.

Registration uses ``torch.library.Library`` ``define``/``impl`` (cheaper per call than
``torch.library.custom_op``). A torch operator is global to the process, so each op is exported
for one host. Every op has an Autograd kernel too: the op's declared backward
(``OpSpec.backward``), or ``UnsupportedError`` when a gradient is asked through an op that
declares none (never a zero or missing gradient).

>>> import torch, tenferro_host as tf
>>> from tenferro_host.interop import torch as tf_torch
>>> add = tf_torch.export("ext_add_kernel.add")
>>> add(torch.ones(3), torch.ones(3)).tolist()
[2.0, 2.0, 2.0]
>>> torch.ops.tf_ext_add_kernel.add(torch.ones(2), torch.ones(2)).tolist()
[2.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
from torch._functorch.utils import enable_single_level_autograd_function
from torch.autograd.function import _SingleLevelFunction

from ..dtypes import ALL, DType, dtype
from ..errors import ForeignRuntimeError, ValidationError
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
from ._hosts import default_host

if TYPE_CHECKING:
    from .._cpu._runtime import CpuRuntime
    from .._host import Host
    from ..provider._runtime import Runtime
    from ..provider._storage import Storage
    from ..tensor import Tensor
    from ._bridge import ExportedOp

#: the outputs' layouts an export may choose
LAYOUTS = ("row-major", "column-major")
_SCHEMA_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}
#: op name -> its export (a torch operator exists once per process)
_EXPORTS: Exports[TorchOp] = Exports(
    "torch", "layout", LAYOUTS, "a torch operator is global to the process"
)


def torch_dtype(dt: DType) -> torch.dtype:
    """The torch dtype of a host dtype."""
    found = getattr(torch, dt.name, None)
    if not isinstance(found, torch.dtype):
        raise ValidationError(f"torch has no dtype for {dt.name}", argument="dtype")
    return found


def host_dtype(t: torch.Tensor) -> DType:
    """The host dtype of a torch tensor (each torch dtype looked up once)."""
    found = _HOST_DTYPES.get(t.dtype)
    if found is None:
        found = _HOST_DTYPES[t.dtype] = dtype(str(t.dtype).removeprefix("torch."))
    return found


#: torch dtype -> host dtype, every host dtype torch has made at import (a lookup per input)
_HOST_DTYPES: dict[torch.dtype, DType] = {
    getattr(torch, d.name): d for d in ALL if isinstance(getattr(torch, d.name, None), torch.dtype)
}
#: host dtype -> torch dtype, the same pairs
_TORCH_DTYPES = {d: t for t, d in _HOST_DTYPES.items()}


class TorchOp:
    """One op exported as a torch operator; calling it calls ``torch.ops.NS.NAME``."""

    def __init__(self, op: ExportedOp, namespace: str, layout: str = "row-major") -> None:
        self.op = op
        self.host = op.host
        self.namespace = namespace
        #: the outputs' layout: "row-major" (torch's own, C-contiguous) or "column-major"
        self.layout = layout
        self._row_major = layout == "row-major"
        self.op_name = op.name.split(".", 1)[1].replace(".", "_")
        self.qualname = f"{namespace}::{self.op_name}"
        self.schema = self._schema()
        self._lib = torch.library.Library(namespace, "FRAGMENT")
        self._lib.define(self.schema)
        self._lib.impl(self.op_name, self._cpu, "CPU")
        self._lib.impl(self.op_name, self._cuda, "CUDA")
        torch.library.register_fake(self.qualname, self._fake, lib=self._lib)
        # Always registered: an op without a declared backward raises at backward, never a
        # silent zero or missing gradient (torch's fallback only warns).
        self._lib.impl(self.op_name, self._autograd, "Autograd", with_keyset=True)
        self.packet = getattr(getattr(torch.ops, namespace), self.op_name)
        #: the op below autograd: its overload's boxed redispatch (``OpOverload.redispatch``
        #: without its Python frame)
        self._redispatch = self.packet.default._handle.redispatch_boxed
        #: device index -> (runtime, torch device, output allocation, its import)
        self._devices: dict[int, tuple[Runtime, torch.device, Any, Any]] = {}

    def __repr__(self) -> str:
        return f"<TorchOp {self.qualname} of {self.op.name}>"

    def __call__(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        """Call the torch operator; attributes as the op declares them (literals encoded)."""
        if attrs:
            return self.packet(*tensors, **self.op.encode_attributes(attrs))
        return self.packet(*tensors)

    def _schema(self) -> str:
        op = self.op
        args = [f"Tensor {name}" for name in op.inputs]
        attrs = [
            f"{_SCHEMA_TYPES.get(kind, 'str')}? {name}=None" for name, kind in op.attributes.items()
        ]
        params = ", ".join(args + (["*", *attrs] if attrs else []))
        results = (
            "Tensor" if len(op.outputs) == 1 else f"({', '.join(['Tensor'] * len(op.outputs))})"
        )
        return f"{self.op_name}({params}) -> {results}"

    # -- autograd ------------------------------------------------------------------------------
    def _autograd(self, keyset: Any, *tensors: torch.Tensor, **attrs: Any) -> Any:
        """The op's Autograd kernel: a call that records a gradient goes through
        :class:`_Differentiated`, any other one straight below autograd."""
        if torch._C._any_requires_grad(*tensors) and torch.is_grad_enabled():
            with enable_single_level_autograd_function():
                return _Differentiated.apply(self, attrs, *tensors)  # type: ignore[attr-defined]
        return self._redispatch(keyset & _AFTER_AUTOGRAD, *tensors, **attrs)

    def _backward(
        self, ctx: Any, grads: tuple[torch.Tensor, ...]
    ) -> tuple[torch.Tensor | None, ...]:
        """The op's declared backward (JAX's convention) in torch's: for complex tensors,
        torch's gradient is conj(backward(conj(grads)))."""
        spec = self.op.spec
        if spec.backward is None:
            raise no_backward(self.op.name, "torch")
        saved = ctx.saved_tensors
        n = len(self.op.inputs)
        got = run_backward(
            spec,
            "torch",
            self._sibling,
            saved[:n],
            saved[n:],
            [_conj(g) for g in grads],
            ctx.attributes,
        )
        needs = ctx.needs_input_grad[2:]  # after the op and its attributes
        return tuple(_conj(g) if need else None for g, need in zip(got, needs, strict=True))

    def _sibling(self, name: str) -> TorchOp:
        """Op ``name`` exported to torch for this op's host (what a backward calls)."""
        return export(name, host=self.host)

    # -- kernels -------------------------------------------------------------------------------
    def _fake(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        types = self.op.output_types(
            [host_dtype(t) for t in tensors],
            [tuple(t.shape) for t in tensors],
            self.op.decode_attributes(attrs),
        )
        device = tensors[0].device if tensors else torch.device("cpu")
        outs = [
            torch.empty_strided(shape, self._strides(shape), dtype=torch_dtype(dt), device=device)
            for dt, shape in types
        ]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _cpu(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        op = self.op
        runtime = cast("CpuRuntime", op.runtime("cpu"))
        decoded = op.decode_attributes(attrs) if attrs else attrs
        done = self._prepared(runtime, -1, _CPU, None, tensors, decoded)
        if done is not None:
            return done
        inputs = [_cpu_input(runtime, t) for t in tensors]
        with OutputAllocator(runtime, _CPU_BUFFER, _cpu_storage(runtime)) as allocator:
            result = op.call(runtime, inputs, decoded)
        return self._outputs(as_tuple(result, len(op.outputs)), allocator, _CPU)

    def _cuda(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        index = tensors[0].get_device() if tensors else torch.cuda.current_device()
        if index < 0:  # a CPU tensor first: the call runs where the CUDA ones are
            index = max(t.get_device() for t in tensors)
        found = self._devices.get(index)
        if found is None:
            found = self._devices[index] = self._on_device(index)
        runtime, device, make_buffer, import_buffer = found
        decoded = self.op.decode_attributes(attrs) if attrs else attrs
        stream = _current_stream(index)
        capturing = _capturing()
        if not capturing:  # (a capture pins the modules to torch's graph: the call's path)
            done = self._prepared(runtime, index, device, stream, tensors, decoded)
            if done is not None:
                return done
        names = self.op.inputs
        inputs = [_cuda_input(runtime, index, t, n) for t, n in zip(tensors, names, strict=True)]
        allocator = OutputAllocator(runtime, make_buffer, import_buffer)
        results = run_on_stream(
            self.op, runtime, stream, inputs, decoded, allocator, capturing=capturing
        )
        return self._outputs(results, allocator, device)

    def _prepared(
        self,
        runtime: Runtime,
        index: int,
        device: torch.device,
        stream: int | None,
        tensors: tuple[torch.Tensor, ...],
        attrs: dict[str, Any],
    ) -> Any:
        """The call as its prepared replay on torch's buffers (``stream``: torch's CUDA stream,
        None on the CPU), where the op handle planned the key these tensors give as borrowed
        inputs: the outputs ``torch.empty`` in the replay's layouts, the launches on the
        tensors' memory (their addresses on CUDA between the streams, ``launch_on_stream``;
        their numpy views on the CPU); None where there is no such plan (or its guard refused),
        for the call's own path."""
        if not tensors:
            return None
        cpu = stream is None
        key: tuple[Any, ...] = ()
        buffers: tuple[Any, ...] = ()
        for t in tensors:  # as the call's path borrows them: offset 0, a storage each
            dt = _HOST_DTYPES.get(t.dtype)
            if dt is None or t.get_device() != index or t.is_conj() or t.is_neg():
                return None  # (the call's path imports it or says why not)
            key += (dt, tuple(t.shape), t.stride(), 0, runtime)
            buffers += ((t.detach() if t.requires_grad else t).numpy() if cpu else t.data_ptr(),)
        plan = self.op.prepared(key, attrs)
        if plan is None:
            return None
        outs = []
        targets: tuple[Any, ...] = ()
        for _, (dt, shape, strides, _, _) in plan.outputs:
            out = torch.empty_strided(shape, strides, dtype=_TORCH_DTYPES[dt], device=device)
            outs.append(out)
            targets += (out.numpy() if cpu else out.data_ptr(),)
        if not (
            plan.launch_buffers(buffers, targets)
            if stream is None  # (cpu: the numpy views, no stream to order)
            else launch_on_stream(runtime, stream, plan, buffers, targets)
        ):
            return None
        if self._row_major:  # torch's layout, after the launch wrote it (1-D: itself)
            outs = [o.contiguous() for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _on_device(self, index: int) -> tuple[Runtime, torch.device, Any, Any]:
        """What a call on CUDA device ``index`` uses, made once: the runtime, the device, the
        output allocation through torch and the import of its buffer."""
        runtime = self.op.runtime(f"cuda:{index}")
        device = torch.device("cuda", index)
        return runtime, device, _buffer_maker(device), _cuda_storage(runtime)

    @property
    def graph_pins(self) -> list[Any]:
        """What the live CUDA graphs that captured this op keep alive (one entry per graph:
        the runtime's modules at the capture), released when the graph dies."""
        found = []
        for runtime in self.op.runtimes_used():
            pins = getattr(runtime, "graph_pins", None)  # a CUDA runtime's
            if pins is not None:
                found += [p for p in pins() if p.op == self.op.name]
        return found

    def _strides(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The element strides of an output of ``shape`` in this export's layout."""
        return contiguous_strides(shape) if self._row_major else column_major_strides(shape)

    def _outputs(
        self, results: tuple[Tensor, ...], allocator: OutputAllocator, device: torch.device
    ) -> Any:
        """The torch tensors of the variant's results (views of torch buffers, or copies)."""
        row_major = self._row_major
        outs = [_as_torch(t, allocator.buffer_of(t.storage), device, row_major) for t in results]
        return outs[0] if len(outs) == 1 else tuple(outs)


class _Differentiated(_SingleLevelFunction):
    """An exported op under autograd: its kernels below autograd forward, its declared
    backward (or the typed error of an op that declares none) backward.

    A single-level Function, applied by autograd itself (C++), as torch.func does for its
    transform-local nodes: the Autograd kernel runs inside the dispatcher, where a torch.func
    transform has already unwrapped its level, so ``autograd.Function.apply``'s detour through
    torch.func would fail (torch's own ``register_autograd`` does, pytorch#170834)."""

    @staticmethod
    def forward(op: TorchOp, attrs: dict[str, Any], *tensors: torch.Tensor) -> Any:
        with torch._C._AutoDispatchBelowAutograd():
            return op.packet(*tensors, **attrs)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        """Save what the op's backward reads: its inputs, outputs and attributes."""
        op, attrs, *tensors = inputs
        ctx.op = op
        if op.op.spec.backward is not None:
            ctx.save_for_backward(*tensors, *(output if isinstance(output, tuple) else (output,)))
            ctx.attributes = op.op.decode_attributes(dict(attrs))

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return (None, None, *ctx.op._backward(ctx, grads))


def _conj(t: torch.Tensor | None) -> torch.Tensor | None:
    """A complex tensor's conjugate in memory (the bridges import no lazy conjugate bit);
    any other tensor, or None, itself."""
    return t.conj_physical() if t is not None and t.is_complex() else t


def _buffer_maker(device: torch.device) -> Any:
    """The allocation the runtime makes through torch while a variant runs."""

    def make_buffer(nbytes: int, dt: DType) -> torch.Tensor:
        return torch.empty(nbytes // dt.itemsize, dtype=torch_dtype(dt), device=device)

    return make_buffer


_CPU = torch.device("cpu")
_CPU_BUFFER = _buffer_maker(_CPU)


def _cpu_input(runtime: CpuRuntime, t: torch.Tensor) -> Tensor:
    """A CPU torch tensor as a host tensor, zero-copy through its numpy view (a C call; torch's
    ``__dlpack__`` is Python). A tensor numpy cannot view (a dtype numpy lacks, a conjugate or
    negative bit) goes through DLPack, which imports it or says why not."""
    if t.requires_grad:  # below autograd (the forward reads the data)
        t = t.detach()
    try:
        arr = t.numpy()
    except (RuntimeError, TypeError):
        return runtime.from_dlpack(t)
    return runtime._import_array(arr)


def _cuda_input(runtime: Runtime, index: int, t: torch.Tensor, name: str) -> Tensor:
    """A CUDA torch tensor borrowed read-only (``runtime.borrow``: its pointer, sizes and
    strides read through torch's C accessors, no DLPack capsule); one on another device is the
    typed error DLPack's import gives. A lazily conjugated or negated tensor is resolved first:
    its memory holds the values before the conjugation."""
    if t.get_device() != index:
        raise ForeignRuntimeError(
            f"input {name!r} lives on {t.device}, the call runs on cuda:{index}; move it there "
            "first (t.to(...))"
        )
    if t.is_conj() or t.is_neg():  # a lazy bit over memory that holds the other values
        t = t.resolve_conj().resolve_neg()  # (a copy on torch's stream, before the call's wait)
    return runtime.borrow(t.data_ptr(), host_dtype(t), tuple(t.shape), t.stride(), t, True)


def _cuda_storage(runtime: Runtime) -> Callable[[torch.Tensor], Storage]:
    """The storage of a torch buffer the CUDA runtime allocated through (1-D, compact)."""
    return lambda buffer: (
        runtime.borrow(
            buffer.data_ptr(), host_dtype(buffer), tuple(buffer.shape), (1,), buffer
        ).storage
    )


#: torch's current CUDA stream of a device as a handle (the C accessor inductor's code calls:
#: no Stream object per call), and whether it is being captured
_current_stream: Callable[[int], int] = getattr(
    torch._C,
    "_cuda_getCurrentRawStream",
    lambda index: torch.cuda.current_stream(index).cuda_stream,
)
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_capturing: Callable[[], bool] = getattr(
    torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing
)


def _cpu_storage(runtime: CpuRuntime) -> Callable[[torch.Tensor], Storage]:
    """The storage of a torch buffer the CPU runtime allocated through (a host dtype, so numpy
    views it)."""
    return lambda buffer: runtime._import_array(buffer.numpy()).storage


def _as_torch(
    t: Tensor, buffer: torch.Tensor | None, device: torch.device, row_major: bool
) -> torch.Tensor:
    """The torch tensor of result ``t``: the torch buffer it was written to, viewed in the
    host's compact layout (column-major), or a copy in the export's layout: an output in memory
    torch did not allocate, one not compact, and (``row_major``) one whose column-major view is
    not C-contiguous (two dimensions longer than 1 or more)."""
    shape = t.shape
    if buffer is not None and t.strides == (1,) and t.offset == 0 and buffer.shape == shape:
        return buffer  # the whole buffer, 1-D: itself (as_strided costs a dispatch)
    if buffer is not None and is_compact(shape, t.strides):
        view = buffer.as_strided(shape, column_major_strides(shape), t.offset)
        return view.contiguous() if row_major else view  # (contiguous: itself when it is)
    strides = contiguous_strides(shape) if row_major else column_major_strides(shape)
    out = torch.empty_strided(shape, strides, dtype=torch_dtype(t.dtype), device=device)
    if t.numel:
        out.copy_(
            torch.from_dlpack(t)
            if buffer is None
            else buffer.as_strided(shape, t.strides, t.offset)
        )
    return out


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-contiguous tensor of ``shape`` (last index fastest), as torch
    gives them."""
    return tuple(reversed(column_major_strides(tuple(reversed(shape)))))


def export(
    name: str,
    *,
    host: Host | None = None,
    namespace: str | None = None,
    layout: str = "row-major",
) -> TorchOp:
    """Register op ``name`` as ``torch.ops.<namespace>.<op>`` (default namespace
    ``tf_<package>``) and return it; exporting it again returns the same operator.

    ``layout``: the outputs' layout, ``"row-major"`` (C-contiguous, as every torch op's: a
    2-D or higher result the variant wrote column-major is copied once) or ``"column-major"``
    (the host's compact layout, no copy)."""
    ns = namespace or f"tf_{name.split('.', 1)[0]}"
    return _EXPORTS.once(name, host, layout, lambda op: TorchOp(op, ns, layout))


def export_package(
    package: str,
    *,
    host: Host | None = None,
    namespace: str | None = None,
    layout: str = "row-major",
) -> dict[str, TorchOp]:
    """Export every op of distribution ``package`` (its op names' prefix); name -> operator."""
    host = default_host() if host is None else host
    names = [n for n in sorted(host.registry.ops) if n.split(".", 1)[0] == package]
    if not names:
        raise ValidationError(
            f"no ops of package {package!r} are registered; installed: "
            f"{', '.join(sorted({n.split('.', 1)[0] for n in host.registry.ops})) or 'none'}",
            argument="package",
        )
    return {n: export(n, host=host, namespace=namespace, layout=layout) for n in names}


__all__ = ["LAYOUTS", "TorchOp", "export", "export_package", "host_dtype", "torch_dtype"]

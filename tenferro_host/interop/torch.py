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
for one host.

>>> import torch, tenferro_host as tf
>>> from tenferro_host.interop import torch as tf_torch
>>> add = tf_torch.export("ext_add_kernel.add")
>>> add(torch.ones(3), torch.ones(3)).tolist()
[2.0, 2.0, 2.0]
>>> torch.ops.tf_ext_add_kernel.add(torch.ones(2), torch.ones(2)).tolist()
[2.0, 2.0]
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from ..dtypes import DType, dtype
from ..errors import ValidationError
from ..layout import is_compact
from ._bridge import ExportedOp, OutputAllocator, as_tuple, column_major_strides, run_on_stream
from ._hosts import default_host

if TYPE_CHECKING:
    from .._cpu._runtime import CpuRuntime
    from .._host import Host
    from ..provider._storage import Storage
    from ..tensor import Tensor

_SCHEMA_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}
_LOCK = threading.Lock()
#: op name -> its export (a torch operator exists once per process)
_EXPORTS: dict[str, TorchOp] = {}


def torch_dtype(dt: DType) -> torch.dtype:
    """The torch dtype of a host dtype."""
    found = getattr(torch, dt.name, None)
    if not isinstance(found, torch.dtype):
        raise ValidationError(f"torch has no dtype for {dt.name}", argument="dtype")
    return found


def host_dtype(t: torch.Tensor) -> DType:
    """The host dtype of a torch tensor."""
    return dtype(str(t.dtype).removeprefix("torch."))


class TorchOp:
    """One op exported as a torch operator; calling it calls ``torch.ops.NS.NAME``."""

    def __init__(self, host: Host, name: str, namespace: str) -> None:
        self.op = ExportedOp(host, name)
        self.host = host
        self.namespace = namespace
        self.op_name = name.split(".", 1)[1].replace(".", "_")
        self.qualname = f"{namespace}::{self.op_name}"
        self.schema = self._schema()
        self._lib = torch.library.Library(namespace, "FRAGMENT")
        self._lib.define(self.schema)
        self._lib.impl(self.op_name, self._cpu, "CPU")
        self._lib.impl(self.op_name, self._cuda, "CUDA")
        torch.library.register_fake(self.qualname, self._fake, lib=self._lib)
        self.packet = getattr(getattr(torch.ops, namespace), self.op_name)

    def __repr__(self) -> str:
        return f"<TorchOp {self.qualname} of {self.op.name}>"

    def __call__(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        """Call the torch operator; attributes as the op declares them (literals encoded)."""
        return self.packet(*tensors, **self.op.encode_attributes(attrs))

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

    # -- kernels -------------------------------------------------------------------------------
    def _fake(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        types = self.op.output_types(
            [host_dtype(t) for t in tensors],
            [tuple(t.shape) for t in tensors],
            self.op.decode_attributes(attrs),
        )
        device = tensors[0].device if tensors else torch.device("cpu")
        outs = [
            torch.empty_strided(
                shape, column_major_strides(shape), dtype=torch_dtype(dt), device=device
            )
            for dt, shape in types
        ]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _cpu(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        op = self.op
        runtime = cast("CpuRuntime", op.runtime("cpu"))
        inputs = [_cpu_input(runtime, t) for t in tensors]
        with OutputAllocator(runtime, _CPU_BUFFER, _cpu_storage(runtime)) as allocator:
            result = op.call(runtime, inputs, op.decode_attributes(attrs) if attrs else attrs)
        return self._outputs(as_tuple(result, len(op.outputs)), allocator, _CPU)

    def _cuda(self, *tensors: torch.Tensor, **attrs: Any) -> Any:
        device = tensors[0].device if tensors else torch.device("cuda", torch.cuda.current_device())
        results, allocator = run_on_stream(
            self.op,
            self.op.runtime(f"cuda:{device.index or 0}"),
            torch.cuda.current_stream(device).cuda_stream,
            [t.detach() for t in tensors],
            attrs,
            _buffer_maker(device),
            capturing=torch.cuda.is_current_stream_capturing(),
        )
        return self._outputs(results, allocator, device)

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

    def _outputs(
        self, results: tuple[Tensor, ...], allocator: OutputAllocator, device: torch.device
    ) -> Any:
        """The torch tensors of the variant's results (views of torch buffers, or copies)."""
        outs = [_as_torch(t, allocator.buffer_of(t.storage), device) for t in results]
        return outs[0] if len(outs) == 1 else tuple(outs)


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
    if t.requires_grad:  # no autograd formula: the forward reads the data
        t = t.detach()
    try:
        arr = t.numpy()
    except (RuntimeError, TypeError):
        return runtime.from_dlpack(t)
    return runtime._import_array(arr)


def _cpu_storage(runtime: CpuRuntime) -> Callable[[torch.Tensor], Storage]:
    """The storage of a torch buffer the CPU runtime allocated through (a host dtype, so numpy
    views it)."""
    return lambda buffer: runtime._import_array(buffer.numpy()).storage


def _as_torch(t: Tensor, buffer: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """The torch tensor of result ``t``: a view of the torch buffer it was written to, else a
    copy (an output in memory torch did not allocate, or not compact)."""
    shape = t.shape
    if buffer is not None and t.strides == (1,) and t.offset == 0 and buffer.shape == shape:
        return buffer  # the whole buffer, 1-D: itself (as_strided costs a dispatch)
    strides = column_major_strides(shape)
    if buffer is not None and is_compact(shape, t.strides):
        return buffer.as_strided(shape, strides, t.offset)
    out = torch.empty_strided(shape, strides, dtype=torch_dtype(t.dtype), device=device)
    if t.numel:
        out.copy_(
            torch.from_dlpack(t)
            if buffer is None
            else buffer.as_strided(shape, t.strides, t.offset)
        )
    return out


def export(name: str, *, host: Host | None = None, namespace: str | None = None) -> TorchOp:
    """Register op ``name`` as ``torch.ops.<namespace>.<op>`` (default namespace
    ``tf_<package>``) and return it; exporting it again returns the same operator."""
    host = default_host() if host is None else host
    with _LOCK:
        found = _EXPORTS.get(name)
        if found is not None:
            if found.host is not host:
                raise ValidationError(
                    f"op {name!r} is already exported to torch for another Host "
                    "(a torch operator is global to the process); export it for one host",
                    argument="host",
                    op=name,
                )
            return found
        ns = namespace or f"tf_{name.split('.', 1)[0]}"
        exported = _EXPORTS[name] = TorchOp(host, name, ns)
        return exported


def export_package(
    package: str, *, host: Host | None = None, namespace: str | None = None
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
    return {n: export(n, host=host, namespace=namespace) for n in names}


__all__ = ["TorchOp", "export", "export_package", "host_dtype", "torch_dtype"]

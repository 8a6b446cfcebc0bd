"""What the torch and JAX bridges share: an op's declaration read once for a framework.

:class:`ExportedOp` holds what both need from an op's ``Signature``: its inputs, outputs and
attributes as framework types (an ``object`` attribute, such as a tuple of axes, travels as the
Python literal of its value), and the output dtypes and shapes its rules give for given input
dtypes and shapes. Outputs are laid out as the host lays out every compact tensor: column-major
(:func:`column_major_strides`), so a framework's fake/abstract output matches what the variant
writes.

:class:`OutputAllocator` makes the variant's outputs the framework's memory: while it is active
on a runtime, the runtime's allocations on the calling thread come from ``make_buffer`` (a
framework allocation, imported zero-copy through DLPack), and :meth:`OutputAllocator.buffer_of`
names the framework buffer under a result tensor.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..dtypes import DType, dtype
from ..errors import ValidationError
from ..layout import compact_strides
from ._hosts import default_host

#: The dtype of a framework buffer under raw bytes (a workspace): 4-byte words, rounded up.
WORD = dtype("uint32")

if TYPE_CHECKING:
    from .._host import Host
    from .._op_handle import OpHandle
    from .._rules import Rule
    from ..ops import OpSpec
    from ..provider._op_replay import OpReplay
    from ..provider._runtime import Runtime
    from ..provider._storage import Storage
    from ..tensor import Tensor

#: Attribute types a framework schema carries as themselves; any other travels as a literal.
NATIVE_ATTRIBUTES = (bool, int, float, str)


class Exported(Protocol):
    """An op one framework exported (its ``TorchOp`` or ``JaxOp``): made for one host."""

    host: Host


E = TypeVar("E", bound=Exported)


def column_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a compact tensor of the host (first index fastest); a 1-D one's
    without a loop (every framework call keys its buffers' strides)."""
    return _UNIT if len(shape) == 1 else compact_strides(tuple(shape))


_UNIT = (1,)


class ExportedOp:
    """An op of ``host`` as a framework sees it: names, attribute kinds, output rules."""

    def __init__(self, host: Host, name: str) -> None:
        record = host.registry.op(name)
        spec = record.spec
        if spec is None:
            raise ValidationError(
                f"op {name!r} has no specification loaded; its package failed to register",
                argument="name",
                op=name,
            )
        self.host = host
        self.spec: OpSpec = spec
        self.name = spec.name
        sig = spec.signature
        self.inputs = tuple(sig.inputs)
        self.outputs = tuple(sig.outputs)
        self.attributes = dict(sig.attributes)
        #: attributes that travel as the Python literal of their value
        self.literal = {a for a, t in self.attributes.items() if t not in NATIVE_ATTRIBUTES}
        self._runtimes: dict[str, Runtime] = {}
        #: the op's handle, looked up again when a later registration replaces the op
        self._handle: OpHandle | None = None

    def runtime(self, name: str) -> Runtime:
        """The host's runtime ``name``, looked up once (``host.backend`` parses the name)."""
        runtime = self._runtimes.get(name)
        if runtime is None:
            runtime = self._runtimes[name] = self.host.backend(name)
        return runtime

    def runtimes_used(self) -> list[Runtime]:
        """The runtimes this op has run on through the bridge."""
        return list(self._runtimes.values())

    def handle(self) -> OpHandle:
        """The op's handle (``host.op``), looked up again when a registration replaced the op."""
        handle = self._handle
        if handle is None or handle._ops.get(self.name) is not handle.record:
            handle = self._handle = self.host.op(self.name)
        return handle

    def prepared(self, key: tuple[Any, ...], attrs: dict[str, Any]) -> OpReplay | None:
        """The op handle's replay planned for a call of borrowed inputs keyed ``key`` (per input
        its dtype, shape, strides, offset 0 and runtime) with ``attrs`` (decoded), launchable
        on a framework's addresses (:func:`launch_on_stream`); None: the call's own path."""
        return self.handle().prepared(key, attrs)

    def call(self, runtime: Runtime, inputs: Sequence[Tensor], attrs: dict[str, Any]) -> Any:
        """Run the op on host tensors of ``runtime`` (``attrs``: the op's own, decoded) outside
        any session: the op handle's call, so a planned call replays (no session, no variant)
        and any other takes the full path with every check (``host.op``)."""
        handle = self._handle
        if handle is None or handle._ops.get(self.name) is not handle.record:  # (replaced)
            handle = self.handle()
        if inputs:
            return handle(*inputs, **attrs)
        return handle(backend=runtime.name, **attrs)

    def encode_attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Attributes as the framework carries them: literals for the ``object`` ones."""
        unknown = set(attrs) - set(self.attributes)
        if unknown:
            raise self.spec.unknown_attributes_error(unknown)
        return {k: repr(v) if k in self.literal else v for k, v in attrs.items()}

    def decode_attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The op's attributes from the framework's (None: left out, the variant's default)."""
        out = {}
        for key, value in attrs.items():
            if value is None:
                continue
            if key in self.literal:
                try:
                    value = ast.literal_eval(value)
                except (ValueError, SyntaxError) as exc:
                    raise ValidationError(
                        f"op {self.name!r}: attribute {key!r} travels as a Python literal, "
                        f"got {value!r} ({exc})",
                        argument=key,
                        op=self.name,
                    ) from exc
            out[key] = value
        return out

    def output_types(
        self, dtypes: Sequence[DType], shapes: Sequence[tuple[int, ...]], attrs: dict[str, Any]
    ) -> list[tuple[DType, tuple[int, ...]]]:
        """(dtype, shape) of every output for inputs of ``dtypes`` and ``shapes``."""
        sig = self.spec.signature
        n = len(self.outputs)
        out_dtypes = _apply(sig.rule("dtype_rule"), list(dtypes), n, attrs, self.name)
        out_shapes = _apply(sig.rule("shape_rule"), [tuple(s) for s in shapes], n, attrs, self.name)
        return [(dtype(d), tuple(s)) for d, s in zip(out_dtypes, out_shapes, strict=True)]


def _apply(
    rule: Rule | None, values: list[Any], n_outputs: int, attrs: dict[str, Any], op: str
) -> tuple[Any, ...]:
    """What a dtype or shape rule gives, one value per output. Unlike the host's own check it
    keeps symbolic sizes (torch's SymInts under dynamic shapes) as they are: a single output's
    shape is whatever the rule returns, unless that is a 1-tuple holding one shape."""
    if rule is None:
        return (values[0],) * n_outputs
    got = rule(op, values, attrs)
    if n_outputs > 1:
        return tuple(got)
    if isinstance(got, (tuple, list)) and len(got) == 1 and isinstance(got[0], (tuple, list)):
        return (tuple(got[0]),)
    return (got,)


class OutputAllocator:
    """While active, ``runtime``'s allocations on this thread come from ``make_buffer``.

    ``make_buffer(nbytes, dt)`` returns a framework array of ``nbytes // dt.itemsize`` elements
    of ``dt`` (anything ``runtime.from_dlpack`` imports, or ``import_buffer`` when given), or
    None to leave that allocation to the runtime; the storage of the import is what the variant
    writes, so a result tensor lives in framework memory with no copy. Other threads'
    allocations keep the runtime's allocator. An op handle's planned call (its replay) allocates
    through the same seam, so it writes the framework's buffers too.
    """

    __slots__ = ("_buffers", "_import", "_make", "_previous", "_runtime", "_thread")

    def __init__(
        self,
        runtime: Runtime,
        make_buffer: Callable[[int, DType], Any | None],
        import_buffer: Callable[[Any], Storage] | None = None,
    ) -> None:
        self._runtime = runtime
        self._make = make_buffer
        #: the storage of a framework buffer (default: ``runtime.from_dlpack``'s)
        self._import = import_buffer
        #: id(storage) -> (storage, framework buffer); the storage is kept so its id stays its own
        self._buffers: dict[int, tuple[Storage, Any]] = {}
        self._thread = 0
        self._previous: Any = None

    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        if threading.get_ident() != self._thread:
            return self._previous(nbytes, dt)
        buffer = self._make(nbytes, dt)
        if buffer is None:
            return self._previous(nbytes, dt)
        imp = self._import
        storage = self._runtime.from_dlpack(buffer).storage if imp is None else imp(buffer)
        self._buffers[id(storage)] = (storage, buffer)
        return storage

    def make_storage(self, nbytes: int, dt: DType) -> Storage:
        """A framework allocation of ``nbytes`` as a storage, not tracked as an output (a
        workspace under a framework's graph capture)."""
        buffer = self._make(nbytes, dt)
        imp = self._import
        return self._runtime.from_dlpack(buffer).storage if imp is None else imp(buffer)

    def __enter__(self) -> OutputAllocator:
        runtime = self._runtime
        self._thread = threading.get_ident()
        self._previous = runtime._allocate  # an enclosing allocator's, or the runtime's own
        runtime._allocate = self._allocate  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        runtime = self._runtime
        if getattr(self._previous, "__self__", None) is runtime:
            del runtime._allocate  # the class's method again
        else:
            runtime._allocate = self._previous  # type: ignore[method-assign]

    def buffer_of(self, storage: Storage) -> Any:
        """The framework buffer under ``storage``, or None if this allocator did not make it."""
        entry = self._buffers.get(id(storage))
        return None if entry is None or entry[0] is not storage else entry[1]


def run_on_stream(
    op: ExportedOp,
    runtime: Runtime,
    stream: int,
    inputs: Sequence[Tensor],
    attrs: dict[str, Any],
    allocator: OutputAllocator,
    *,
    capturing: bool,
    then: Callable[[tuple[Tensor, ...]], None] | None = None,
) -> tuple[Tensor, ...]:
    """Run ``op`` between a framework's work on its CUDA ``stream`` (a handle): its results.
    ``attrs`` are the op's own, decoded (:meth:`ExportedOp.decode_attributes`).

    ``inputs`` are the framework's buffers borrowed (``runtime.borrow``), ``allocator`` makes
    the outputs the framework's memory. The call is the op handle's outside any session, so a
    planned call replays. The runtime's stream waits for ``stream`` before it, and ``stream``
    for the runtime's work after it and after ``then`` (work on the results, such as copies
    into the framework's result buffers), also when the call raises: no host wait.
    ``capturing``: the framework is capturing ``stream`` into a CUDA graph, which this call's
    launches join; then the runtime works as its ``foreign_capture`` says (no event polling, no
    drain, every allocation from the framework) and its loaded modules are pinned to that graph
    until it dies.
    """
    if not capturing:
        return _ordered_call(op, runtime, stream, inputs, attrs, allocator, then)
    make = allocator.make_storage
    hold = runtime.foreign_capture(  # type: ignore[attr-defined]  # a CUDA runtime's
        lambda nbytes: make(-(-nbytes // 4) * 4, WORD)
    )
    with hold:
        results = _ordered_call(op, runtime, stream, inputs, attrs, allocator, then)
        hold.pin(stream, op.name)
    return results


def launch_on_stream(
    runtime: Runtime,
    stream: int,
    plan: OpReplay,
    inputs: tuple[int, ...],
    outputs: tuple[int, ...],
) -> bool:
    """The prepared call on a framework's buffers: ``plan`` (an op handle's replay for the
    call's key, :meth:`ExportedOp.prepared`) launched on the device addresses ``inputs`` and
    ``outputs`` (allocated by the framework in the layouts of ``plan.outputs``), with no host
    tensor, no session and no allocation of the host: the runtime's stream waits for ``stream``
    before, ``stream`` for the runtime's after (also when a launch raises). False: the replay's
    guard refused it (the framework's call takes the op handle's path)."""
    streams = runtime.streams  # type: ignore[attr-defined]  # a CUDA runtime's
    streams.after(stream)
    try:
        return plan.launch_buffers(inputs, outputs)
    finally:
        streams.before(stream)


def _ordered_call(
    op: ExportedOp,
    runtime: Runtime,
    stream: int,
    inputs: Sequence[Tensor],
    attrs: dict[str, Any],
    allocator: OutputAllocator,
    then: Callable[[tuple[Tensor, ...]], None] | None,
) -> tuple[Tensor, ...]:
    streams = runtime.streams  # type: ignore[attr-defined]  # a CUDA runtime's
    streams.after(stream)
    try:
        with allocator:
            result = op.call(runtime, inputs, attrs)
        results = as_tuple(result, len(op.outputs))
        if then is not None:
            then(results)
    finally:
        streams.before(stream)
    return results


class Exports(Generic[E]):
    """The ops one framework has exported in this process, by name. A framework's operator is
    global to the process, so a name is exported once, for one host and one value of the
    export's ``option`` (torch's ``layout``, JAX's ``vmap_method``); exporting it again with the
    same ones returns it, with others is refused."""

    def __init__(self, framework: str, option: str, choices: Sequence[str], why: str) -> None:
        self.framework, self.option, self.choices, self.why = framework, option, choices, why
        self._lock = threading.Lock()
        self._made: dict[str, E] = {}

    def get(self, name: str) -> E | None:
        return self._made.get(name)

    def once(self, name: str, host: Host | None, value: str, make: Callable[[ExportedOp], E]) -> E:
        """The export of ``name`` for ``host`` (None: the bridges' default host) and ``value``,
        made by ``make`` from the op as both frameworks see it the first time."""
        if value not in self.choices:
            raise ValidationError(
                f"{self.option} must be one of {', '.join(self.choices)}, got {value!r}",
                argument=self.option,
                op=name,
            )
        host = default_host() if host is None else host
        with self._lock:
            found = self._made.get(name)
            if found is None:
                found = self._made[name] = make(ExportedOp(host, name))
            elif found.host is not host or getattr(found, self.option) != value:
                raise ValidationError(
                    f"op {name!r} is already exported to {self.framework} for another Host or "
                    f"{self.option} ({getattr(found, self.option)!r}; {self.why}); export it once",
                    argument="host" if found.host is not host else self.option,
                    op=name,
                )
            return found


def as_tuple(result: Any, n_outputs: int) -> tuple[Any, ...]:
    """An op's result as a tuple of its outputs."""
    return (result,) if n_outputs == 1 else tuple(result)


__all__ = [
    "ExportedOp",
    "Exports",
    "OutputAllocator",
    "as_tuple",
    "column_major_strides",
    "launch_on_stream",
    "run_on_stream",
]

"""``ex.capture()`` on CUDA as a native graph: stream capture of the runtime's one stream,
instantiated once and launched with ``cuGraphLaunch`` on every replay.

While the capture is open (:class:`NativeCapture`) the runtime's stream is captured in relaxed
mode, the retirement queue is held by the capture (no event polling, no deferred release, as in
a framework's capture: :mod:`._foreign_capture`), an upload from host is refused (it would
capture a copy from a temporary host buffer), and every allocation comes from an
:class:`Arena` of ``cuMemAlloc`` blocks the graph owns: their addresses are baked into the
graph, so they are freed — behind an event, after the last replay — only once the graph and
every storage in the arena are gone. At its end the graph is instantiated and launched once, so
the tensors made inside the block hold the captured computation's values, as eagerly.

:class:`NativeLauncher` replays it: each kernel node's pointer parameters were found by matching
their values against the memory of the graph's inputs, outputs and constants (a pointer into
an input's memory moves with it, one into memory several of them share is not followed: the
graph keeps the replayed form), and the parameters that hold a declared scalar by probes
(:mod:`._graph_scalars`); a replay allocates fresh outputs, rewrites
(``cuGraphExecKernelNodeSetParams``) only the nodes whose pointers moved or whose scalar changed,
and launches the graph. A fill (``zeros``) the block made is a constant's: it runs in the
capture's launch only; one an op call made runs in every replay. A graph whose memory or nodes
this cannot follow keeps the replayed form and says why (:meth:`NativeCapture.launcher`).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tenferro_host import LaunchError, Tensor
from tenferro_host.provider import Lease

from ._driver import POISONED, entry, failure
from ._foreign_capture import GraphPins
from ._graph_scalars import Kernel, Site, probe_values, scalar_sites, written_as
from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._runtime import CudaRuntime

_INVALID_VALUE = 1  # CUDA_ERROR_INVALID_VALUE


class Arena:
    """The ``cuMemAlloc`` blocks of one capture. Each storage made from it holds it (its release
    is ``("drop", arena)``) and so does the graph; when the last goes, the blocks are freed at
    the runtime's next drain point behind an event (every launch that used them is before it)."""

    __slots__ = ("blocks", "ends", "runtime")

    def __init__(self, runtime: CudaRuntime) -> None:
        self.runtime = runtime
        self.blocks: list[int] = []
        self.ends: list[int] = []  # each block's end address

    def allocate(self, nbytes: int, op: str | None = None) -> CudaStorage:
        rt = self.runtime
        with rt.primary:
            ptr = int(
                rt.ok(rt.driver.cuMemAlloc(nbytes), f"allocating {nbytes} bytes (cuMemAlloc)", op)
            )
        self.blocks.append(ptr)
        self.ends.append(ptr + nbytes)
        return CudaStorage(rt, ptr, nbytes, release=("drop", self))

    def holds(self, address: int) -> bool:
        """Whether ``address`` is in one of this arena's blocks."""
        return any(lo <= address < hi for lo, hi in zip(self.blocks, self.ends, strict=True))

    def owns(self, release: Any) -> bool:
        """Whether ``release`` (a storage's) is of this arena's memory."""
        return type(release) is tuple and release[1] is self

    def __del__(self) -> None:
        if self.blocks:  # a finalizer never calls the driver: the drain point frees them
            self.runtime.deferred.append(
                ("call", partial(_retire_blocks, self.runtime, self.blocks))
            )


def _retire_blocks(rt: CudaRuntime, blocks: list[int]) -> None:
    """Free ``blocks`` once the stream passes an event recorded now (context current)."""
    event = rt.record_event(context_current=True)
    rt.retirement.retire(
        event, [Lease(blocks, partial(_free_blocks, rt)), Lease(event, rt.recycle_event)]
    )


def _free_blocks(rt: CudaRuntime, blocks: list[int]) -> None:
    d = rt.driver
    with rt.primary:
        for ptr in blocks:
            if int(d.cuMemFree(ptr)[0]) != 0:
                rt.deferred_errors += 1


def _destroy(rt: CudaRuntime, graph: Any, exec_: Any) -> None:
    """Destroy an executable and its graph (in flight, the driver frees it on completion)."""
    d = rt.driver
    with rt.primary:
        if exec_ is not None:
            d.cuGraphExecDestroy(exec_)
        d.cuGraphDestroy(graph)


class _GraphOwner:
    """What owns a driver graph and its executable (the capture, then its launcher): destroyed
    by :meth:`_destroy_graph`, or at the runtime's drain point once the owner is gone (a
    finalizer never calls the driver)."""

    runtime: CudaRuntime
    _graph: Any = None  # None: it owns none (never made, handed on, or destroyed)
    _exec: Any = None

    def _destroy_graph(self) -> None:
        if self._graph is not None:
            _destroy(self.runtime, self._graph, self._exec)
            self._graph = self._exec = None

    def __del__(self) -> None:
        if self._graph is not None:
            self.runtime.deferred.append(
                ("call", partial(_destroy, self.runtime, self._graph, self._exec))
            )


class NativeCapture(_GraphOwner):
    """The CUDA side of one ``ex.capture()``: :meth:`begin`, then :meth:`end`, then
    :meth:`launcher` for the graph (see the module docstring)."""

    def __init__(self, runtime: CudaRuntime) -> None:
        self.runtime = runtime
        self.arena = Arena(runtime)
        #: where each declared scalar reaches the kernels (:meth:`probe`), or why it cannot
        self._scalar_sites: list[Site] | str = "the declared scalars were not probed"
        #: per fill the capture made, in order: whether an op call made it (it runs each replay;
        #: one the block made is a constant's, disabled after the capture's own launch)
        self._fills: list[bool] = []
        self.disabled: set[int] = set()  # the nodes the replays skip (int handles)
        self._fills_known = True  # the graph's fill nodes are the fills noted, one for one

    def begin(self) -> None:
        """Capture the runtime's stream; allocations from the arena, uploads refused."""
        self._begin(self.arena)

    def _begin(self, arena: Arena) -> None:
        rt = self.runtime
        d = rt.driver
        with rt.primary:
            mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
            rt.ok(d.cuStreamBeginCapture(rt._stream, mode), "cuStreamBeginCapture")
        rt.allocate_bytes = arena.allocate  # type: ignore[method-assign]
        rt.free_now = partial(_free_now, rt, arena)  # type: ignore[method-assign]
        rt._write = self._refuse_upload  # type: ignore[method-assign]
        if arena is self.arena:  # the capture's own fills (a probe's are not noted)
            rt._fill_zero = self._fill_zero  # type: ignore[method-assign]

    def _fill_zero(self, storage: Any) -> None:
        """A fill (``zeros``) captured as a node; whether an op call made it is noted."""
        capture = self.runtime.active_capture
        self._fills.append(capture is not None and capture.in_op_call)
        type(self.runtime)._fill_zero(self.runtime, storage)

    def _end(self) -> tuple[Any, Any]:
        """Stop capturing the stream: (the driver's answer, the graph)."""
        rt = self.runtime
        del rt.allocate_bytes, rt.free_now, rt._write  # the class's methods again
        vars(rt).pop("_fill_zero", None)
        with rt.primary:
            err, graph = rt.driver.cuStreamEndCapture(rt._stream)
        return err, graph

    def _refuse_upload(self, storage: Any, data: Any) -> None:
        raise self.runtime.active_capture.refuse(
            "an upload from host (the graph would copy from a temporary host buffer)",
            "upload before the capture and pass the tensor in (a constant or a slot)",
        )

    def end(self, failed: bool) -> None:
        """End the capture. ``failed``: destroy what was captured (no partial graph); else
        instantiate the graph and launch it once (the block's tensors get their values)."""
        rt = self.runtime
        d = rt.driver
        err, graph = self._end()
        if int(err) != 0:
            if failed:  # the block's own error is the one to raise
                return
            raise failure(err, "ending the capture (cuStreamEndCapture)", uuid=rt.uuid_bytes)
        if failed:
            _destroy(rt, graph, None)
            return
        with rt.primary:
            err, exec_ = d.cuGraphInstantiate(graph, 0)
        if int(err) != 0:
            _destroy(rt, graph, None)
            raise failure(err, "instantiating the captured graph", uuid=rt.uuid_bytes)
        self._graph, self._exec = graph, exec_
        with rt.primary:
            err = d.cuGraphLaunch(exec_, rt._stream)[0]
        if int(err) != 0:
            self.discard()
            raise failure(
                err, "launching the captured graph", uuid=rt.uuid_bytes, error=LaunchError
            )
        self._disable_constant_fills()

    def _disable_constant_fills(self) -> None:
        """A fill the block made (not an op call) made a constant of the graph: it ran in the
        capture's launch and no replay repeats it (as in the replayed form, where the constant
        is the tensor the block made). A graph whose fills are not the ones noted is not
        followed (:meth:`launcher` says so)."""
        rt = self.runtime
        d = rt.driver
        fills = [node for node, kind in _graph_nodes(d, self._graph) if kind == "fill"]
        if len(fills) != len(self._fills):
            self._fills_known = False
            return
        with rt.primary:
            for node, in_call in zip(fills, self._fills, strict=True):
                if not in_call:
                    rt.ok(d.cuGraphNodeSetEnabled(self._exec, node, 0), "cuGraphNodeSetEnabled")
                    self.disabled.add(int(node))

    def probe(self, scalars: dict[str, Any], rerun: Callable[[dict[str, Any]], None]) -> None:
        """Find where each declared scalar reaches the graph's kernels (:mod:`._graph_scalars`):
        ``rerun(values)`` makes the capture's calls again with these scalar values; each probe
        is captured into a graph of its own (memory from an arena of its own), read, destroyed,
        never launched. What it finds is the launcher's; a probe that raised is why not."""
        try:
            graph = self._kernels(self._graph, self.arena)
            probes: dict[str, list[tuple[Any, list[Kernel]]]] = {}
            for name, value in scalars.items():
                probes[name] = [
                    (other, self._probed({**scalars, name: other}, rerun))
                    for other in probe_values(value)
                ]
        except Exception as exc:  # a probe value the op refuses, a node not followed, ...
            self._scalar_sites = f"probing the declared scalars: {type(exc).__name__}: {exc}"
            return
        self._scalar_sites = scalar_sites(graph, scalars, probes)

    def _probed(self, values: dict[str, Any], rerun: Callable[[dict[str, Any]], None]) -> Any:
        """The kernels of the capture's calls made again with scalar ``values``."""
        arena = Arena(self.runtime)
        self._begin(arena)
        try:
            rerun(values)
        except BaseException:
            err, graph = self._end()
            if int(err) == 0:
                _destroy(self.runtime, graph, None)
            raise
        err, graph = self._end()
        if int(err) != 0:
            raise failure(err, "ending a probe's capture (cuStreamEndCapture)")
        try:
            return self._kernels(graph, arena)
        finally:
            _destroy(self.runtime, graph, None)

    def _kernels(self, graph: Any, arena: Arena) -> list[Kernel]:
        d = self.runtime.driver
        with self.runtime.primary:
            found = []
            for _, params in _kernel_nodes(d, graph):
                values = _param_values(d, params)
                shape = (
                    int(params.func), params.gridDimX, params.gridDimY, params.gridDimZ,
                    params.blockDimX, params.blockDimY, params.blockDimZ, params.sharedMemBytes,
                )  # fmt: skip
                mine = [len(v) == 8 and arena.holds(int.from_bytes(v, "little")) for v in values]
                found.append(Kernel(shape, values, mine))
        return found

    def discard(self) -> None:
        """Destroy the graph now (its form is the replayed one, or the capture failed)."""
        self._destroy_graph()

    def launcher(
        self,
        slots: list[Tensor],
        constants: list[Tensor],
        outputs: list[Tensor],
        ops: tuple[str, ...],
        scalars: dict[str, Any],
    ) -> NativeLauncher | str:
        """The native replay of the graph with these slots and outputs, or why the graph keeps
        the replayed form (the graph is then destroyed: the recorded calls replay it)."""
        sites = self._scalar_sites if scalars else []
        if isinstance(sites, str):
            why = sites
        else:
            refused = self._refusal(outputs)
            if refused is None:
                try:
                    return NativeLauncher(self, slots, constants, outputs, ops, scalars, sites)
                except _UnfollowableError as exc:
                    refused = str(exc)
            why = refused
        self.discard()
        return why

    def _refusal(self, outputs: list[Tensor]) -> str | None:
        if not self._fills_known:
            return "the graph's fill nodes are not the fills the capture made (zeros)"
        seen: set[int] = set()
        for n, t in enumerate(outputs):
            if (
                not self.arena.owns(getattr(t.storage, "release", None))
                or t.offset
                or id(t.storage) in seen
            ):
                return f"output {n} is not a whole buffer the capture allocated"
            seen.add(id(t.storage))
        return None


def _free_now(rt: CudaRuntime, arena: Arena, storage: CudaStorage) -> None:
    """A workspace freed inside a capture: arena memory stays the graph's; pool memory waits for
    the capture's end (a free now would be a node of the graph)."""
    release, storage.ptr, storage.release = storage.release, 0, None
    if release is not None and not arena.owns(release):
        rt.deferred.append(release)


class _UnfollowableError(Exception):
    """A node the native replay cannot update (the graph keeps the replayed form)."""


class _Node:
    """One kernel node: its parameters and a parameter block of its own (whole words per
    parameter, which the driver copies at each update)."""

    __slots__ = ("_starts", "handle", "params", "pointers", "words")

    def __init__(self, handle: Any, params: Any, values: list[bytes]) -> None:
        self.handle, self.params = handle, params
        width = [max(1, (len(v) + 7) // 8) for v in values]
        self.words = np.zeros(max(sum(width), 1), np.uint64)
        raw = self.words.view(np.uint8)
        starts = np.cumsum([0, *width[:-1]]) * 8 if values else np.zeros(0, np.int64)
        for start, v in zip(starts, values, strict=True):
            raw[start : start + len(v)] = np.frombuffer(v, np.uint8)
        self.pointers = self.words.ctypes.data + starts.astype(np.uint64)
        params.kernelParams = int(self.pointers.ctypes.data) if values else 0
        self._starts = starts

    def word(self, param: int) -> int:
        return int(self._starts[param]) // 8

    def write(self, param: int, data: bytes) -> bool:
        """Write ``data`` as parameter ``param``: whether it changed."""
        raw = self.words.view(np.uint8)
        start = int(self._starts[param])
        if raw[start : start + len(data)].tobytes() == data:
            return False
        raw[start : start + len(data)] = np.frombuffer(data, np.uint8)
        return True


def _graph_nodes(d: Any, graph: Any) -> list[tuple[Any, str]]:
    """Each node of ``graph`` with its kind: "kernel", "fill" (a memset) or the driver's name
    of another (empty nodes left out)."""
    err, _, count = d.cuGraphGetNodes(graph)
    if int(err) == 0 and count:
        err, nodes, count = d.cuGraphGetNodes(graph, count)
    if int(err) != 0:
        raise _UnfollowableError(f"the graph's nodes could not be listed ({int(err)})")
    types = d.CUgraphNodeType
    names = {types.CU_GRAPH_NODE_TYPE_KERNEL: "kernel", types.CU_GRAPH_NODE_TYPE_MEMSET: "fill"}
    out = []
    for node in nodes[:count] if count else ():
        kind = d.cuGraphNodeGetType(node)[1]
        if kind != types.CU_GRAPH_NODE_TYPE_EMPTY:
            out.append((node, names.get(kind, str(kind))))
    return out


def _kernel_nodes(d: Any, graph: Any) -> list[tuple[Any, Any]]:
    """Each kernel node of ``graph`` with its parameters."""
    out = []
    for node, kind in _graph_nodes(d, graph):
        if kind == "kernel":
            err, params = d.cuGraphKernelNodeGetParams(node)
            if int(err) != 0 or not params.kernelParams:
                raise _UnfollowableError("a kernel node's parameters could not be read")
            out.append((node, params))
    return out


def _check_fills(d: Any, graph: Any, disabled: set[int], moving: list[tuple[int, int]]) -> None:
    """_UnfollowableError where ``graph`` holds work other than kernels and fills, or a fill a
    replay runs (an op call's) into memory that moves (``moving``: the inputs' and outputs')."""
    for node, kind in _graph_nodes(d, graph):
        if kind == "kernel" or (kind == "fill" and int(node) in disabled):
            continue
        if kind != "fill":
            raise _UnfollowableError(
                f"the graph holds a {kind} node (a copy) besides kernels and fills"
            )
        err, params = d.cuGraphMemsetNodeGetParams(node)
        dst = int(params.dst) if int(err) == 0 else None
        if dst is None or any(lo <= dst < hi for lo, hi in moving):
            raise _UnfollowableError(
                "an op call fills an input or output of the graph (a fill node is not updated)"
            )


def _param_values(d: Any, params: Any) -> list[bytes]:
    """The bytes of each parameter of a kernel node (sizes from ``cuFuncGetParamInfo``)."""
    values: list[bytes] = []
    array = ctypes.cast(params.kernelParams, ctypes.POINTER(ctypes.c_void_p))
    index = 0
    while True:
        err, _offset, size = d.cuFuncGetParamInfo(params.func, index)
        if int(err) == _INVALID_VALUE:  # past the last parameter
            return values
        if int(err) != 0:
            raise _UnfollowableError(f"a kernel's parameters could not be listed ({int(err)})")
        values.append(ctypes.string_at(array[index], size))
        index += 1


class NativeLauncher(_GraphOwner):
    """The instantiated graph's replay: fresh outputs, moved pointers rewritten, one launch."""

    def __init__(
        self,
        capture: NativeCapture,
        slots: list[Tensor],
        constants: list[Tensor],
        outputs: list[Tensor],
        ops: tuple[str, ...],
        scalars: dict[str, Any],
        scalar_sites: list[Site],
    ) -> None:
        # (it owns the graph from its last step on: one that failed to build owns nothing)
        self.runtime = rt = capture.runtime
        self.arena = capture.arena  # the intermediates' memory lives with the graph
        self.pins = GraphPins("ex.capture()", tuple(rt.resources.values()))
        self.ops = ops
        #: per output: its allocation (an op replay's: the newest queued block of its size class
        #: where one is) and layout
        self._outputs = [
            (rt.output_allocator(t.storage.nbytes, t.dtype), t.dtype, t.shape, t.strides)
            for t in outputs
        ]
        self._itemsizes = [t.dtype.itemsize for t in slots]
        tensors = [*slots, *outputs]
        #: the base address of each slot, then each output, the executable launches with now
        self._bases = [_base(t) for t in tensors]
        #: the memory of each slot, output (by index) and constant (None: it never moves)
        ranges: list[tuple[int | None, int, int]] = [
            (n, _ptr(t), _ptr(t) + t.storage.nbytes) for n, t in enumerate(tensors)
        ]
        ranges += [(None, _ptr(t), _ptr(t) + t.storage.nbytes) for t in constants]
        #: per base: the (node, word, byte delta) of each parameter that points into it
        self._sites: list[list[tuple[_Node, int, int]]] = [[] for _ in tensors]
        held = {(site.node, site.param) for site in scalar_sites}
        nodes: list[_Node] = []
        with rt.primary:
            for handle, params in _kernel_nodes(rt.driver, capture._graph):
                values = _param_values(rt.driver, params)
                node = _Node(handle, params, values)
                nodes.append(node)
                for param, v in enumerate(values):
                    if len(v) != 8 or (len(nodes) - 1, param) in held:
                        continue
                    value = int.from_bytes(v, "little")
                    hits = [n for n, lo, hi in ranges if lo <= value < hi]
                    if len(hits) > 1:  # which one it follows is not known: do not guess
                        raise _UnfollowableError(
                            "a kernel's pointer is into memory that several of the graph's "
                            "inputs, outputs or constants share"
                        )
                    n = hits[0] if hits else None
                    if n is not None:
                        self._sites[n].append((node, node.word(param), value - self._bases[n]))
        _check_fills(
            rt.driver, capture._graph, capture.disabled, [r[1:] for r in ranges[: len(tensors)]]
        )
        for n, sites in enumerate(self._sites):
            if not sites:  # every slot and output is a kernel's argument: else it is not followed
                what = f"input {n}" if n < len(slots) else f"output {n - len(slots)}"
                raise _UnfollowableError(f"{what}'s address is in no kernel node's parameters")
        #: each parameter that holds a declared scalar, and the values the executable has
        self._scalar_sites = [(s.name, nodes[s.node], s.param, s.format) for s in scalar_sites]
        self._scalars: dict[str, Any] | None = scalars
        self._graph, self._exec = capture._graph, capture._exec
        capture._graph = capture._exec = None  # this launcher owns them now
        self._lock = threading.Lock()
        d = rt.driver
        self._set_params = d.cuGraphExecKernelNodeSetParams
        self._cu_current, self._context = d.cuCtxGetCurrent, int(rt.primary.handle)
        #: cuGraphLaunch through the driver's entry point, its two arguments prebuilt
        self._launch = entry("cuGraphLaunch", d)
        self._launch_args = (ctypes.c_void_p(int(self._exec)), ctypes.c_void_p(int(rt._stream)))

    def __call__(self, tensors: tuple[Tensor, ...], scalars: dict[str, Any]) -> list[Tensor]:
        """Run the graph on ``tensors`` (one per slot, checked) with the declared ``scalars``:
        the fresh outputs. The runtime's state is checked as an op replay checks it; where that
        finds anything (closed, poisoned, a capture, a session open), a session's checks raise
        the typed error or let it run."""
        rt = self.runtime
        if (
            rt.closed
            or POISONED
            or rt.active_capture is not None
            or rt.retirement.refuse_wait is not None
            or rt._session_threads
        ):
            with rt.session():
                return self._run(tensors, scalars)
        return self._run(tensors, scalars)

    def _run(self, tensors: tuple[Tensor, ...], scalars: dict[str, Any]) -> list[Tensor]:
        rt = self.runtime
        outs = [
            Tensor(allocate(), dt, shape, strides, 0, True)
            for allocate, dt, shape, strides in self._outputs
        ]
        bases = [
            t.storage.ptr + t.offset * size  # type: ignore[attr-defined]
            for t, size in zip(tensors, self._itemsizes, strict=True)
        ]
        bases += [t.storage.ptr for t in outs]  # type: ignore[attr-defined]
        err, current = self._cu_current()  # PrimaryContext.enter's check, inline
        saved = rt.primary.enter() if err or int(current) != self._context else None
        try:
            with self._lock:  # the node words are the launcher's: one replay at a time
                if bases != self._bases or scalars is not self._scalars:
                    self._update(bases, scalars)
                err = self._launch(*self._launch_args)
        finally:
            if saved is not None:
                rt.primary.exit(saved)
        if err:
            raise self._failed(err, "launching it (cuGraphLaunch)")
        return outs

    def _update(self, bases: list[int], scalars: dict[str, Any]) -> None:
        """Rewrite the parameters of every node with a pointer into memory that moved or a
        declared scalar whose value changed (every scalar's node after a failed update)."""
        moved: dict[int, _Node] = {}
        if scalars is not self._scalars:
            written = [  # every value converted before any is written
                (node, param, written_as(name, fmt, scalars[name]))
                for name, node, param, fmt in self._scalar_sites
            ]
            for node, param, data in written:
                if node.write(param, data) or self._scalars is None:
                    moved[id(node)] = node
        for n, (base, last) in enumerate(zip(bases, self._bases, strict=True)):
            if base != last:
                for node, word, delta in self._sites[n]:
                    node.words[word] = base + delta
                    moved[id(node)] = node
        self._bases, self._scalars = [-1] * len(bases), None  # until every update went through
        for node in moved.values():
            err = self._set_params(self._exec, node.handle, node.params)[0]
            if int(err) != 0:
                raise self._failed(err, "updating a node (cuGraphExecKernelNodeSetParams)")
        self._bases, self._scalars = bases, scalars

    def _failed(self, err: Any, what: str) -> Exception:
        ops = ", ".join(dict.fromkeys(self.ops))
        exc = failure(
            err,
            f"{what} of a captured graph of ops {ops}",
            uuid=self.runtime.uuid_bytes,
            op=self.ops[0] if self.ops else None,
            error=LaunchError,
        )
        exc.add_note(f"in a native CUDA graph of {len(self.ops)} nodes (ops {ops})")
        return exc

    def close(self) -> None:
        """Destroy the executable now; the arena goes once its last storage does."""
        self._destroy_graph()


def _ptr(t: Tensor) -> int:
    return cast(CudaStorage, t.storage).ptr


def _base(t: Tensor) -> int:
    """The address of ``t``'s element at offset 0 (a parameter is kept relative to it)."""
    return _ptr(t) + t.offset * t.dtype.itemsize


__all__ = ["Arena", "NativeCapture", "NativeLauncher"]

"""The replay of a native CUDA graph (:mod:`._native_graph` records it).

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
import weakref
from typing import TYPE_CHECKING, Any, cast

from tenferro_host import LaunchError, Tensor
from tenferro_host.provider import GraphLaunchCore

from ._driver import POISONED, address, entry, failure
from ._foreign_capture import GraphPins
from ._graph_nodes import (
    GraphOwner,
    Node,
    UnfollowableError,
    check_fills,
    kernel_nodes,
    param_values,
)
from ._graph_scalars import Site, written_as
from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._native_graph import NativeCapture


class NativeLauncher(GraphOwner):
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
        self._sites: list[list[tuple[Node, int, int]]] = [[] for _ in tensors]
        held = {(site.node, site.param) for site in scalar_sites}
        self._nodes: list[Node] = []
        nodes = self._nodes
        with rt.primary:
            for handle, params in kernel_nodes(rt.driver, capture._graph):
                values = param_values(rt.driver, params)
                node = Node(handle, params, values)
                nodes.append(node)
                for param, v in enumerate(values):
                    if len(v) != 8 or (len(nodes) - 1, param) in held:
                        continue
                    value = int.from_bytes(v, "little")
                    hits = [n for n, lo, hi in ranges if lo <= value < hi]
                    if len(hits) > 1:  # which one it follows is not known: do not guess
                        raise UnfollowableError(
                            "a kernel's pointer is into memory that several of the graph's "
                            "inputs, outputs or constants share"
                        )
                    n = hits[0] if hits else None
                    if n is not None:
                        self._sites[n].append((node, node.word(param), value - self._bases[n]))
        check_fills(
            rt.driver, capture._graph, capture.disabled, [r[1:] for r in ranges[: len(tensors)]]
        )
        for n, sites in enumerate(self._sites):
            if not sites:  # every slot and output is a kernel's argument: else it is not followed
                what = f"input {n}" if n < len(slots) else f"output {n - len(slots)}"
                raise UnfollowableError(f"{what}'s address is in no kernel node's parameters")
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
        #: the replay compiled (CapturedGraph.replay calls it first), where the extension is
        self.core = (
            None if GraphLaunchCore is None else self._compiled(slots, constants, outputs, scalars)
        )

    def _compiled(
        self,
        slots: list[Tensor],
        constants: list[Tensor],
        made: list[Tensor],
        scalars: dict[str, Any],
    ) -> Any:
        """The compiled replay: the same checks, guard, outputs, node rewrites and launch as
        the Python one, through the driver's entry points (it makes the context current on a
        thread that has none, and restores none); new values of the declared scalars, and
        what else it does not cover, come back here."""
        rt = self.runtime
        outputs = tuple(
            (allocate, t.storage.nbytes, rt.blocks.size_class(t.storage.nbytes), tuple(layout))
            for (allocate, *layout), t in zip(self._outputs, made, strict=True)
        )
        index = {id(node): k for k, node in enumerate(self._nodes)}
        # each node's parameter struct as the driver reads it, and each pointer's word
        nodes = tuple((int(node.handle), node.params.getPtr()) for node in self._nodes)
        sites = tuple(
            tuple((index[id(node)], node.address(word), delta) for node, word, delta in of)
            for of in self._sites
        )
        d = rt.driver
        return GraphLaunchCore(
            weakref.ref(self), int(self._exec), int(rt._stream), address(self._launch),
            tuple((t.dtype, t.shape, t.strides) for t in slots), tuple(self._itemsizes),
            tuple(t.storage for t in constants), self._bases, scalars, self._lock,
            address(entry("cuGraphExecKernelNodeSetParams", d)), nodes, sites,
            rt, CudaStorage, self._context, address(entry("cuCtxGetCurrent", d)),
            address(entry("cuCtxSetCurrent", d)), None, threading.get_ident(), outputs,
            (), (), (), (),
        )  # fmt: skip

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
        outs = [
            Tensor(allocate(), dt, shape, strides, 0, True)
            for allocate, dt, shape, strides in self._outputs
        ]
        return self._launch_with(tensors, outs, scalars)

    def _launch_with(
        self, tensors: tuple[Tensor, ...], outs: list[Tensor], scalars: dict[str, Any]
    ) -> list[Tensor]:
        """Launch the executable on ``tensors`` into ``outs`` (made), its nodes rewritten where
        a pointer moved or a scalar changed (the compiled replay's way when a scalar did)."""
        rt = self.runtime
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
        moved: dict[int, Node] = {}
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
        # (in place: the compiled replay reads the same list)
        self._bases[:], self._scalars = [-1] * len(bases), None  # until every update went through
        for node in moved.values():
            err = self._set_params(self._exec, node.handle, node.params)[0]
            if int(err) != 0:
                raise self._failed(err, "updating a node (cuGraphExecKernelNodeSetParams)")
        self._bases[:], self._scalars = bases, scalars

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


__all__ = ["NativeLauncher"]

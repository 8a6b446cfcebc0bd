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

:class:`~._graph_launcher.NativeLauncher` replays the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from tenferro_host import LaunchError, Tensor
from tenferro_host.provider import Lease

from ._driver import failure
from ._graph_launcher import NativeLauncher
from ._graph_nodes import (
    GraphOwner,
    UnfollowableError,
    destroy,
    graph_nodes,
    kernel_nodes,
    param_values,
)
from ._graph_scalars import Kernel, Site, probe_values, scalar_sites
from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._runtime import CudaRuntime


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


class NativeCapture(GraphOwner):
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
        #: the copies into the captured runtime not yet waited for: (source runtime, the event
        #: after its copy, the copied tensor); the stream waits for them when the capture ends
        self._copies: list[tuple[CudaRuntime, Any, Tensor]] = []
        self._copied_in_op_call = False  # a replay would not repeat it: the replayed form

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
        rt.recording = self
        if arena is self.arena:  # the capture's own fills (a probe's are not noted)
            rt._fill_zero = self._fill_zero  # type: ignore[method-assign]

    def _fill_zero(self, storage: Any) -> None:
        """A fill (``zeros``) captured as a node; whether an op call made it is noted."""
        capture = self.runtime.active_capture
        self._fills.append(capture is not None and capture.in_op_call)
        type(self.runtime)._fill_zero(self.runtime, storage)

    def _end(self) -> tuple[Any, Any]:
        """Stop capturing the stream: (the driver's answer, the graph). The stream then waits
        for the copies made into the capture's memory (before any launch of the graph, and
        before the arena can be freed behind an event of this stream)."""
        rt = self.runtime
        del rt.allocate_bytes, rt.free_now, rt._write  # the class's methods again
        vars(rt).pop("_fill_zero", None)
        rt.recording = None
        with rt.primary:
            err, graph = rt.driver.cuStreamEndCapture(rt._stream)
        copies, self._copies = self._copies, []
        for source, done, copied in copies:  # the copied tensor held until the copy is done
            rt.stream_wait(done)
            source.retirement.retire(done, [Lease(copied), Lease(done, source.recycle_event)])
        return err, graph

    def copied(self, source: CudaRuntime, done: Any, t: Tensor) -> None:
        """``t`` of ``source`` was copied into this capture's memory on the source's stream (a
        constant of the graph: made once, as in the replayed form), ``done`` recorded after it;
        a copy an op call made would not be repeated by a replay: the graph is not followed."""
        capture = self.runtime.active_capture
        self._copied_in_op_call |= capture is not None and capture.in_op_call
        self._copies.append((source, done, t))

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
            destroy(rt, graph, None)
            return
        with rt.primary:
            err, exec_ = d.cuGraphInstantiate(graph, 0)
        if int(err) != 0:
            destroy(rt, graph, None)
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
        fills = [node for node, kind in graph_nodes(d, self._graph) if kind == "fill"]
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
                destroy(self.runtime, graph, None)
            raise
        err, graph = self._end()
        if int(err) != 0:
            raise failure(err, "ending a probe's capture (cuStreamEndCapture)")
        try:
            return self._kernels(graph, arena)
        finally:
            destroy(self.runtime, graph, None)

    def _kernels(self, graph: Any, arena: Arena) -> list[Kernel]:
        d = self.runtime.driver
        with self.runtime.primary:
            found = []
            for _, params in kernel_nodes(d, graph):
                values = param_values(d, params)
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
                except UnfollowableError as exc:
                    refused = str(exc)
            why = refused
        self.discard()
        return why

    def _refusal(self, outputs: list[Tensor]) -> str | None:
        if not self._fills_known:
            return "the graph's fill nodes are not the fills the capture made (zeros)"
        if self._copied_in_op_call:
            return (
                "an op call copies between runtimes: the copy is made once, when it is called, "
                "and a native replay repeats only the graph's nodes"
            )
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


__all__ = ["Arena", "NativeCapture"]

"""A CUDA runtime working inside another framework's CUDA graph capture (torch's CUDA graphs).

A framework bridge runs an op on the runtime's stream, ordered after the framework's stream by
an event; while the framework captures its stream into a graph, that wait joins the runtime's
stream to the capture, so every launch of the call becomes a node of the framework's graph.
Inside it the runtime must do nothing a capture refuses or a replay would not repeat:

* no event polling and no draining of deferred releases (``cuEventQuery`` of an event recorded
  on a captured stream is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and a free would become a node
  of the graph): the retirement queue is held (:attr:`RetirementQueue.refuse_wait`, a host wait
  is a ``CaptureError``) and the releases wait in the deferred queue until the call is over;
* no memory of the runtime's pool or block cache (its address would be baked into the graph and
  reused after): every allocation of the calling thread comes from ``allocate``, the
  framework's allocator, which owns the graph's memory (torch's graph pool), and a workspace
  freed at the end of a raw session is left to that allocator;
* what the graph launches but the framework cannot see, the runtime's loaded modules, is pinned
  to the graph: a CUDA user object retained by the graph being captured
  (``cuStreamGetCaptureInfo``, ``cuUserObjectCreate``, ``cuGraphRetainUserObject``) whose
  destructor the driver calls once the graph and every executable made from it are destroyed
  and their launches complete. The destructor, on a driver thread where no CUDA call is allowed,
  only queues the pins as a ``("drop", pins)`` release; the runtime's next drain point lets
  them go.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenferro_host import CaptureError

if TYPE_CHECKING:
    from ._runtime import CudaRuntime
    from ._storage import CudaStorage

#: user-object token -> (runtime, pins) for every graph that pins something and is alive
_PINNED: dict[int, tuple[CudaRuntime, GraphPins]] = {}
_tokens = itertools.count(1)


class GraphPins:
    """What one framework graph keeps alive: the runtime's modules when ``op`` was captured."""

    __slots__ = ("__weakref__", "modules", "op")

    def __init__(self, op: str, modules: tuple[Any, ...]) -> None:
        self.op = op
        self.modules = modules

    def __repr__(self) -> str:
        return f"<GraphPins of {self.op}: {len(self.modules)} modules>"


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _graph_died(token: int | None) -> None:
    """The user object's destructor (a driver thread, no CUDA call): queue the pins' release.
    At interpreter shutdown the module's globals may be gone: nothing is left to release."""
    try:
        entry = _PINNED.pop(token or 0, None)
        if entry is not None:
            runtime, pins = entry
            runtime.deferred.append(("drop", pins))
    except Exception:  # shutdown: nothing may raise into the driver's thread
        pass


def live_pins(runtime: CudaRuntime) -> list[GraphPins]:
    """The pins of every framework graph still alive that captured work of ``runtime``."""
    return [pins for rt, pins in list(_PINNED.values()) if rt is runtime]


class ForeignCapture:
    """``with ForeignCapture(runtime, allocate):`` — the runtime's work on this thread joins a
    graph another framework is capturing (see the module docstring). ``allocate(nbytes)`` is the
    framework's allocation imported as a storage of ``runtime``."""

    def __init__(self, runtime: CudaRuntime, allocate: Callable[[int], CudaStorage]) -> None:
        self.runtime = runtime
        self._allocate = allocate
        self._thread = 0

    def __enter__(self) -> ForeignCapture:
        rt = self.runtime
        retirement = rt.retirement
        if rt.active_capture is not None or retirement.refuse_wait is not None:
            raise CaptureError(
                f"runtime {rt.name!r} is already being captured (ex.capture() or another "
                "framework's graph); a framework graph cannot capture it too",
                fix="end that capture first, or use another runtime (host.new_backend)",
            )
        self._thread = threading.get_ident()
        retirement.refuse_wait = self._refuse_wait
        rt.allocate_bytes = self._allocate_bytes  # type: ignore[method-assign]
        rt.free_now = self._free_now  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        rt = self.runtime
        del rt.allocate_bytes, rt.free_now  # the class's methods again
        rt.retirement.refuse_wait = None

    def _refuse_wait(self, what: str) -> None:
        raise CaptureError(
            f"{what} would block the host inside a framework's CUDA graph capture of "
            f"{self.runtime.name!r}",
            fix="release what the runtime holds before the capture (runtime.synchronize())",
        )

    def _allocate_bytes(self, nbytes: int, op: str | None = None) -> CudaStorage:
        if threading.get_ident() != self._thread:
            return type(self.runtime).allocate_bytes(self.runtime, nbytes, op)
        return self._allocate(nbytes)

    def _free_now(self, storage: CudaStorage) -> None:
        if storage.kind == "imported":  # the framework's memory: its allocator frees it
            return
        type(self.runtime).free_now(self.runtime, storage)

    def pin(self, stream: int, op: str) -> GraphPins | None:
        """Pin the runtime's loaded modules to the graph ``stream`` is being captured into,
        until that graph dies; None when ``stream`` is not capturing."""
        rt = self.runtime
        d = rt.driver
        with rt.primary:
            info = rt.ok(d.cuStreamGetCaptureInfo(d.CUstream(stream)), "cuStreamGetCaptureInfo")
            status, graph = info[0], info[2]
            if status != d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE:
                return None
            pins = GraphPins(op, tuple(rt.resources.values()))
            token = next(_tokens)
            _PINNED[token] = (rt, pins)
            try:
                obj = rt.ok(
                    d.cuUserObjectCreate(
                        token,
                        d.CUhostFn(ctypes.cast(_graph_died, ctypes.c_void_p).value),
                        1,
                        d.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC,
                    ),
                    "cuUserObjectCreate",
                )
            except BaseException:
                del _PINNED[token]
                raise
            try:
                rt.ok(
                    d.cuGraphRetainUserObject(
                        graph, obj, 1, d.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE
                    ),
                    "cuGraphRetainUserObject",
                )
            except BaseException:
                d.cuUserObjectRelease(obj, 1)  # runs the destructor: the pins go
                raise
        return pins


__all__ = ["ForeignCapture", "GraphPins", "live_pins"]

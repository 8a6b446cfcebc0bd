"""Stream capture and graphs in the fake CUDA driver (:class:`support.driver_stand_in.
FakeDriver`, the one driver double of the tests), in a room of their own: a captured graph's
nodes (each kernel node's parameter block, and the parameters' struct as the driver lays it
out), its executables and the user objects it retains."""

from __future__ import annotations

import ctypes
import itertools
import types
from typing import TYPE_CHECKING, Any

_WORD = ctypes.c_uint64
_VOID_P, _UINT = ctypes.c_void_p, ctypes.c_uint
#: the parameter sizes of each kernel the fake driver knows, by handle (what a launch reads)
PARAM_SIZES: dict[int, tuple[int, ...]] = {}

#: a kernel node's launch shape, as CUDA_KERNEL_NODE_PARAMS names it
SHAPE = (
    "gridDimX",
    "gridDimY",
    "gridDimZ",
    "blockDimX",
    "blockDimY",
    "blockDimZ",
    "sharedMemBytes",
)


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS (v2) as the driver lays it out: what a kernel node's parameters
    are read as, and what cuGraphExecKernelNodeSetParams's C entry point is given."""

    _fields_ = [
        ("func", _VOID_P),
        *((name, _UINT) for name in SHAPE),
        ("kernelParams", _VOID_P),
        ("extra", _VOID_P),
        ("kern", _VOID_P),
        ("ctx", _VOID_P),
    ]

    def getPtr(self) -> int:
        return ctypes.addressof(self)


class StandInNode:
    """A node of a captured graph; a kernel node owns its parameter block, as the driver's
    does (``kernelParams``: an array of pointers to one 8-byte word per parameter)."""

    def __init__(
        self, handle: int, kind: int, func: int, words: list[int], shape: tuple[int, ...]
    ) -> None:
        self.handle, self.kind, self.func, self.words = handle, kind, func, words
        self.shape = shape  # grid, block (x, y, z each) and shared memory bytes
        self._words = (_WORD * max(len(words), 1))(*words)
        base = ctypes.addressof(self._words)
        self._pointers = (ctypes.c_void_p * max(len(words), 1))(
            *(base + 8 * i for i in range(len(words)))
        )
        self.address = ctypes.addressof(self._pointers) if words else 0


def node_words(params: int, func: int) -> list[int]:
    """The 8-byte parameter words a kernel parameter block (an array of pointers) points at."""
    pointers = (ctypes.c_void_p * len(PARAM_SIZES[func])).from_address(params)
    return [_WORD.from_address(p).value for p in pointers]


class GraphCalls:
    """The driver's capture and graph calls: ``capturing`` maps each stream captured to its
    graph, as the driver does it in global mode (see :meth:`begin_capture`)."""

    if TYPE_CHECKING:  # the other parts' (FakeDriver's)
        calls: list[tuple[str, Any]]
        launch_result: int
        CUgraphNodeType: Any

    def __init__(self) -> None:
        self.capturing: dict[int, int] = {}  # stream -> the graph it is captured into
        self.captured_events: dict[int, int] = {}  # event -> graph of its last record
        self.user_objects: dict[int, tuple[int, int]] = {}  # object -> (ptr, destructor)
        self.graph_objects: dict[int, list[int]] = {}  # graph -> the user objects it retains
        self._graphs = itertools.count(0xC000)
        #: native graphs: each captured graph's nodes, each executable's node words
        self.graph_nodes: dict[int, list[StandInNode]] = {}
        self.nodes: dict[int, StandInNode] = {}
        self.execs: dict[int, dict[int, list[int]]] = {}
        self._nodes = itertools.count(0xD000)
        self.update_result = 0  # what cuGraphExecKernelNodeSetParams answers

    # -- stream capture ----------
    def begin_capture(self, stream: int) -> int:
        """A framework begins capturing ``stream`` into a new graph (returned)."""
        graph = next(self._graphs)
        self.capturing[stream] = graph
        self.graph_objects[graph] = []
        self.graph_nodes[graph] = []
        return graph

    def end_capture(self, graph: int) -> None:
        """The capture into ``graph`` ends on every stream it joined."""
        for stream in [s for s, g in self.capturing.items() if g == graph]:
            del self.capturing[stream]

    def destroy_graph(self, graph: int) -> None:
        """The graph (and its executables) die: each retained user object's destructor runs,
        as the driver runs it, through its C function pointer."""
        for obj in self.graph_objects.pop(graph):
            ptr, destroy = self.user_objects.pop(obj)
            ctypes.CFUNCTYPE(None, ctypes.c_void_p)(destroy)(ptr)

    def node(
        self, stream: int, kind: int, func: int, words: list[int], shape: tuple[int, ...] = ()
    ) -> None:
        """A node of the graph ``stream`` is captured into."""
        found = StandInNode(next(self._nodes), kind, func, words, shape or (0,) * 7)
        self.nodes[found.handle] = found
        self.graph_nodes[self.capturing[stream]].append(found)

    def cuStreamGetCaptureInfo(self, stream):
        self.calls.append(("cuStreamGetCaptureInfo", stream))
        graph = self.capturing.get(stream)
        if graph is None:
            return (0, 0, 0, None, None, None, 0)
        return (0, 1, graph, graph, None, None, 0)

    def cuUserObjectCreate(self, ptr, destroy, refs, flags):
        self.calls.append(("cuUserObjectCreate", ptr))
        obj = next(self._graphs)
        self.user_objects[obj] = (ptr, destroy)
        return (0, obj)

    def cuGraphRetainUserObject(self, graph, obj, count, flags):
        self.calls.append(("cuGraphRetainUserObject", (graph, obj)))
        self.graph_objects[graph].append(obj)
        return (0,)

    # -- native graphs (ex.capture() on CUDA) ----------
    def cuStreamBeginCapture(self, stream, mode):
        self.calls.append(("cuStreamBeginCapture", mode))
        self.begin_capture(stream)
        return (0,)

    def cuStreamEndCapture(self, stream):
        self.calls.append(("cuStreamEndCapture", stream))
        graph = self.capturing.get(stream)
        if graph is None:
            return (1, None)  # CUDA_ERROR_INVALID_VALUE: not capturing
        self.end_capture(graph)
        return (0, graph)

    def cuGraphInstantiate(self, graph, flags):
        self.calls.append(("cuGraphInstantiate", graph))
        exec_ = next(self._graphs)
        self.execs[exec_] = {n.handle: list(n.words) for n in self.graph_nodes[graph]}
        return (0, exec_)

    def cuGraphLaunch(self, exec_, stream):
        """Recorded with the words each node of the executable launches with now."""
        self.calls.append(("cuGraphLaunch", {k: list(v) for k, v in self.execs[exec_].items()}))
        return (self.launch_result,)

    def cuGraphGetNodes(self, graph, count=0):
        nodes = [n.handle for n in self.graph_nodes[graph]]
        return (0, nodes[:count], len(nodes))

    def cuGraphNodeGetType(self, node):
        return (0, self.nodes[node].kind)

    def cuGraphMemsetNodeGetParams(self, node):
        return (0, types.SimpleNamespace(dst=self.nodes[node].words[0]))

    def cuGraphNodeSetEnabled(self, exec_, node, enabled):
        """A disabled node is left out of the executable's launches (recorded as such)."""
        self.calls.append(("cuGraphNodeSetEnabled", (node, enabled)))
        if not enabled:
            self.execs[exec_].pop(node)
        return (0,)

    def cuGraphKernelNodeGetParams(self, node):
        found = self.nodes[node]
        shape = dict(zip(SHAPE, found.shape, strict=True))
        return (0, KernelNodeParams(func=found.func, kernelParams=found.address, **shape))

    def cuGraphExecKernelNodeSetParams(self, exec_, node, params):
        if isinstance(params, int):  # from C: the struct's address
            params = KernelNodeParams.from_address(params)
        words = node_words(params.kernelParams, params.func)
        self.calls.append(("cuGraphExecKernelNodeSetParams", (node, words)))
        if self.update_result:
            return (self.update_result,)
        self.execs[exec_][node] = words
        return (0,)

    def cuGraphExecDestroy(self, exec_):
        self.calls.append(("cuGraphExecDestroy", exec_))
        del self.execs[exec_]
        return (0,)

    def cuGraphDestroy(self, graph):
        self.calls.append(("cuGraphDestroy", graph))
        for found in self.graph_nodes.pop(graph):
            del self.nodes[found.handle]
        if graph in self.graph_objects:
            self.destroy_graph(graph)
        return (0,)

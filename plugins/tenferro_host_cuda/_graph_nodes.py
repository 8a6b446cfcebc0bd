"""A driver graph read and owned: its nodes and their kinds, a kernel node's parameters and the
copy of them a replay rewrites (:class:`Node`), the checks that say what a native replay cannot
follow, and who destroys the graph and its executable (:class:`GraphOwner`)."""

from __future__ import annotations

import ctypes
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ._runtime import CudaRuntime

_INVALID_VALUE = 1  # CUDA_ERROR_INVALID_VALUE


def destroy(rt: CudaRuntime, graph: Any, exec_: Any) -> None:
    """Destroy an executable and its graph (in flight, the driver frees it on completion)."""
    d = rt.driver
    with rt.primary:
        if exec_ is not None:
            d.cuGraphExecDestroy(exec_)
        d.cuGraphDestroy(graph)


class GraphOwner:
    """What owns a driver graph and its executable (the capture, then its launcher): destroyed
    by :meth:`_destroy_graph`, or at the runtime's drain point once the owner is gone (a
    finalizer never calls the driver)."""

    runtime: CudaRuntime
    _graph: Any = None  # None: it owns none (never made, handed on, or destroyed)
    _exec: Any = None

    def _destroy_graph(self) -> None:
        if self._graph is not None:
            destroy(self.runtime, self._graph, self._exec)
            self._graph = self._exec = None

    def __del__(self) -> None:
        if self._graph is not None:
            self.runtime.deferred.append(
                ("call", partial(destroy, self.runtime, self._graph, self._exec))
            )


class UnfollowableError(Exception):
    """A node the native replay cannot update (the graph keeps the replayed form)."""


class Node:
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

    def address(self, word: int) -> int:
        """The address of word ``word`` of the parameter block (a compiled replay writes it)."""
        return int(self.words.ctypes.data) + 8 * word

    def write(self, param: int, data: bytes) -> bool:
        """Write ``data`` as parameter ``param``: whether it changed."""
        raw = self.words.view(np.uint8)
        start = int(self._starts[param])
        if raw[start : start + len(data)].tobytes() == data:
            return False
        raw[start : start + len(data)] = np.frombuffer(data, np.uint8)
        return True


def graph_nodes(d: Any, graph: Any) -> list[tuple[Any, str]]:
    """Each node of ``graph`` with its kind: "kernel", "fill" (a memset) or the driver's name
    of another (empty nodes left out)."""
    err, _, count = d.cuGraphGetNodes(graph)
    if int(err) == 0 and count:
        err, nodes, count = d.cuGraphGetNodes(graph, count)
    if int(err) != 0:
        raise UnfollowableError(f"the graph's nodes could not be listed ({int(err)})")
    types = d.CUgraphNodeType
    names = {types.CU_GRAPH_NODE_TYPE_KERNEL: "kernel", types.CU_GRAPH_NODE_TYPE_MEMSET: "fill"}
    out = []
    for node in nodes[:count] if count else ():
        kind = d.cuGraphNodeGetType(node)[1]
        if kind != types.CU_GRAPH_NODE_TYPE_EMPTY:
            out.append((node, names.get(kind, str(kind))))
    return out


def kernel_nodes(d: Any, graph: Any) -> list[tuple[Any, Any]]:
    """Each kernel node of ``graph`` with its parameters."""
    out = []
    for node, kind in graph_nodes(d, graph):
        if kind == "kernel":
            err, params = d.cuGraphKernelNodeGetParams(node)
            if int(err) != 0 or not params.kernelParams:
                raise UnfollowableError("a kernel node's parameters could not be read")
            out.append((node, params))
    return out


def check_fills(d: Any, graph: Any, disabled: set[int], moving: list[tuple[int, int]]) -> None:
    """UnfollowableError where ``graph`` holds work other than kernels and fills, or a fill a
    replay runs (an op call's) into memory that moves (``moving``: the inputs' and outputs')."""
    for node, kind in graph_nodes(d, graph):
        if kind == "kernel" or (kind == "fill" and int(node) in disabled):
            continue
        if kind != "fill":
            raise UnfollowableError(
                f"the graph holds a {kind} node (a copy) besides kernels and fills"
            )
        err, params = d.cuGraphMemsetNodeGetParams(node)
        dst = int(params.dst) if int(err) == 0 else None
        if dst is None or any(lo <= dst < hi for lo, hi in moving):
            raise UnfollowableError(
                "an op call fills an input or output of the graph (a fill node is not updated)"
            )


def param_values(d: Any, params: Any) -> list[bytes]:
    """The bytes of each parameter of a kernel node (sizes from ``cuFuncGetParamInfo``)."""
    values: list[bytes] = []
    array = ctypes.cast(params.kernelParams, ctypes.POINTER(ctypes.c_void_p))
    index = 0
    while True:
        err, _offset, size = d.cuFuncGetParamInfo(params.func, index)
        if int(err) == _INVALID_VALUE:  # past the last parameter
            return values
        if int(err) != 0:
            raise UnfollowableError(f"a kernel's parameters could not be listed ({int(err)})")
        values.append(ctypes.string_at(array[index], size))
        index += 1


__all__ = [
    "GraphOwner",
    "Node",
    "UnfollowableError",
    "check_fills",
    "destroy",
    "graph_nodes",
    "kernel_nodes",
    "param_values",
]

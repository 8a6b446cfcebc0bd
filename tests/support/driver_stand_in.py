"""The fake CUDA driver, the one driver double of the tests, and a CudaRuntime built on it,
without a GPU.

:class:`FakeDriver` stands in for ``cuda.bindings.driver`` (behind ``_driver.drv()`` or passed
as ``CudaRuntime(..., driver=...)``) for every CUDA test that runs without a GPU: ``devices``
GPUs, their contexts, streams, events, modules and launches here, their pools, memory and copies
in :mod:`support.fake_cuda_driver`, stream capture and graphs in
:mod:`support.graph_nodes_stand_in`. Every call the runtime, its sessions and raw sessions make
is recorded as ``(name, argument)`` in ``calls``, so tests prove hot paths by counting driver
calls (the allocator, the context guard, events) and cProfile counts Python calls of a whole
cuda-raw op; the calls a hot path makes live in this module, so a traced call enters the driver
in one file. Types and enums come from the real module (they load without a driver); any other
call is an AttributeError naming it.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from tenferro_host_cuda import _driver as driver
from tenferro_host_cuda import _launch
from tenferro_host_cuda._module import Module, load_image
from tenferro_host_cuda._runtime import CudaRuntime

import tenferro_host as tf
from support.fake_cuda_driver import CTX, STREAM_CAPTURE_UNSUPPORTED, DeviceMemory, real
from support.graph_nodes_stand_in import PARAM_SIZES, GraphCalls, node_words

STREAM = 0x5000  # the first stream made
UNKNOWN = 999  # CUDA_ERROR_UNKNOWN: what a C entry point of the fake answers when it raised
ERROR_STRINGS = {
    2: b"out of memory",
    STREAM_CAPTURE_UNSUPPORTED: b"operation not permitted when stream is capturing",
    UNKNOWN: b"the fake driver raised under a C entry point (FakeDriver.c_errors)",
}
#: what ``cuKernelGetAttribute`` answers (0 for any other attribute)
KERNEL_ATTRIBUTES = {real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024}
_handles = itertools.count(0x9000)
#: the function handle of each cuda.core kernel launched into a capture
_CORE_FUNCTIONS: dict[Any, int] = {}


_VOID_P, _UINT = ctypes.c_void_p, ctypes.c_uint
#: cuLaunchKernel's C signature
_C_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, _VOID_P, *[_UINT] * 7, _VOID_P, _VOID_P, _VOID_P)
_C_RECORD = ctypes.CFUNCTYPE(ctypes.c_int, _VOID_P, _VOID_P)  # also cuGraphLaunch's
_C_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, _VOID_P, _VOID_P, _UINT)
_C_CURRENT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_VOID_P))
_C_SET_CURRENT = ctypes.CFUNCTYPE(ctypes.c_int, _VOID_P)
_C_SET_PARAMS = ctypes.CFUNCTYPE(ctypes.c_int, _VOID_P, _VOID_P, _VOID_P)


class FakeDriver(DeviceMemory, GraphCalls):
    """The CUDA driver of ``devices`` fake GPUs, its calls recorded as (name, argument);
    ``peer(dst, src)`` answers cuDeviceCanAccessPeer for an ordered pair; ``thread_context`` is
    the context current on a thread that set none (0: none; :func:`recording_driver` makes
    device 0's current, as a process that used CUDA before has it)."""

    CUmemPool_attribute = types.SimpleNamespace(
        CU_MEMPOOL_ATTR_RELEASE_THRESHOLD=0,
        CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT=1,
        CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH=2,
        CU_MEMPOOL_ATTR_USED_MEM_CURRENT=3,
        CU_MEMPOOL_ATTR_USED_MEM_HIGH=4,
    )
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)
    CUstreamCaptureStatus = types.SimpleNamespace(
        CU_STREAM_CAPTURE_STATUS_NONE=0, CU_STREAM_CAPTURE_STATUS_ACTIVE=1
    )
    CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_RELAXED=2)
    CUgraphNodeType = types.SimpleNamespace(
        CU_GRAPH_NODE_TYPE_KERNEL=0,
        CU_GRAPH_NODE_TYPE_MEMCPY=1,
        CU_GRAPH_NODE_TYPE_MEMSET=2,
        CU_GRAPH_NODE_TYPE_EMPTY=5,
    )
    CUuserObject_flags = types.SimpleNamespace(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC=1)
    CUuserObjectRetain_flags = types.SimpleNamespace(CU_GRAPH_USER_OBJECT_MOVE=1)
    CUdriverProcAddress_flags = types.SimpleNamespace(CU_GET_PROC_ADDRESS_DEFAULT=0)

    def __init__(
        self,
        devices: int = 2,
        *,
        peer: Callable[[int, int], bool] | None = None,
        drop_peer_writes: bool = False,
        thread_context: int = 0,
    ) -> None:
        DeviceMemory.__init__(self, devices, peer, drop_peer_writes)
        GraphCalls.__init__(self)
        self.calls: list[tuple[str, Any]] = []
        self.thread_context = thread_context
        self.stream_devices: dict[int, int] = {}
        self.launch_result = 0
        #: record a launch's parameter words as they are at the call, not views of its block
        self.copy_words = False
        self._tls = threading.local()
        self._blocks: dict[int, Any] = {}
        self._events = itertools.count(1)
        self._streams = itertools.count(STREAM, 0x10)
        #: loaded libraries (their kernels' parameter sizes) and their kernels by symbol
        self.libraries: dict[int, tuple[int, ...]] = {}
        self.kernels: dict[tuple[int, bytes], int] = {}
        #: exceptions raised under a C entry point (they cannot cross into C)
        self.c_errors: list[Exception] = []
        self._c_entries = {
            b"cuLaunchKernel": _C_LAUNCH(self._launch_from_c),
            b"cuEventRecord": _C_RECORD(self._from_c("cuEventRecord")),
            b"cuStreamWaitEvent": _C_WAIT(self._from_c("cuStreamWaitEvent")),
            b"cuGraphLaunch": _C_RECORD(self._from_c("cuGraphLaunch")),
            b"cuCtxGetCurrent": _C_CURRENT(self._current_from_c),
            b"cuCtxSetCurrent": _C_SET_CURRENT(self._from_c("cuCtxSetCurrent")),
            b"cuGraphExecKernelNodeSetParams": _C_SET_PARAMS(
                self._from_c("cuGraphExecKernelNodeSetParams")
            ),
        }

    # Types and enums of the real module; never its functions.
    def __getattr__(self, name: str) -> Any:
        value = getattr(real, name)
        if isinstance(value, type):
            return value
        raise AttributeError(f"the fake CUDA driver has no {name}; add it to {__name__}")

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def stream_of(self, runtime: Any) -> int:
        return int(runtime.stream_handle)

    # -- errors, versions, handles ----------
    def cuGetErrorName(self, err):
        return (0, real.CUresult(int(err)).name.encode())

    def cuGetErrorString(self, err):
        return (0, ERROR_STRINGS.get(int(err), b"simulated failure"))

    def cuDriverGetVersion(self):
        return (0, 13000)

    def CUresult(self, code):
        return code

    def CUfunction(self, handle):
        return handle

    def CUstream(self, handle):
        return handle

    def CUhostFn(self, address):
        return address

    # -- contexts ----------
    def cuDevicePrimaryCtxRetain(self, dev):
        return (0, CTX + int(dev))

    def cuDevicePrimaryCtxRelease(self, dev):
        return (0,)

    def cuCtxGetCurrent(self):
        self.calls.append(("cuCtxGetCurrent", None))
        try:  # (no getattr: a call the call-count gates would count)
            return (0, self._tls.ctx)
        except AttributeError:
            return (0, self.thread_context)

    def cuCtxSetCurrent(self, ctx):
        self.calls.append(("cuCtxSetCurrent", int(ctx)))
        self._tls.ctx = int(ctx)
        return (0,)

    def _current_device(self) -> int:
        ctx = getattr(self._tls, "ctx", self.thread_context)
        assert ctx >= CTX, "no context is current"
        return ctx - CTX

    # -- streams and events ----------
    def cuStreamCreate(self, flags):
        """STREAM for the first runtime, a stream of its own for each one after it."""
        stream = next(self._streams)
        self.stream_devices[stream] = self._current_device()
        return (0, stream)

    def cuStreamDestroy(self, stream):
        return (0,)

    def cuStreamSynchronize(self, stream):
        return (0,)

    def cuEventCreate(self, flags):
        self.calls.append(("cuEventCreate", flags))
        return (0, next(self._events))

    def cuEventRecord(self, event, stream):
        self.calls.append(("cuEventRecord", (event, stream)))
        graph = self.capturing.get(stream)
        if graph is None:
            self.captured_events.pop(event, None)
        else:  # a node of the capture: only another captured stream's wait may use it
            self.captured_events[event] = graph
        return (0,)

    def cuEventQuery(self, event):
        self.calls.append(("cuEventQuery", event))
        if self.capturing or event in self.captured_events:
            return (STREAM_CAPTURE_UNSUPPORTED,)  # global capture mode, or a captured event
        return (0,)

    def cuEventSynchronize(self, event):
        return (0,)

    def cuEventDestroy(self, event):
        self.calls.append(("cuEventDestroy", event))
        return (0,)

    def cuStreamWaitEvent(self, stream, event, flags):
        """A wait on an event of a capture joins ``stream`` to it (a fork of the capture)."""
        self.calls.append(("cuStreamWaitEvent", (stream, event)))
        graph = self.captured_events.get(event)
        if graph is not None and graph in self.capturing.values():
            self.capturing[stream] = graph
        return (0,)

    # -- modules (an image's bytes are its kernels' parameter sizes) ----------
    def cuLibraryLoadData(self, data, *options):
        self.calls.append(("cuLibraryLoadData", len(data)))
        library = next(_handles)
        self.libraries[library] = tuple(data)
        return (0, library)

    def cuLibraryGetModule(self, library):
        return (0, library)

    def cuLibraryGetKernel(self, library, symbol):
        kernel = self.kernels.get((library, symbol))
        if kernel is None:
            kernel = self.kernels[(library, symbol)] = next(_handles)
            PARAM_SIZES[kernel] = self.libraries[library]
        return (0, kernel)

    def cuKernelGetParamInfo(self, kernel, index):
        sizes = PARAM_SIZES[kernel]
        if index >= len(sizes):
            return (1, 0, 0)  # CUDA_ERROR_INVALID_VALUE: past the last parameter
        return (0, 8 * index, sizes[index])

    def cuFuncGetParamInfo(self, func, index):
        return self.cuKernelGetParamInfo(func, index)

    def cuKernelGetAttribute(self, attr, kernel, dev):
        return (0, KERNEL_ATTRIBUTES.get(attr, 0))

    def cuLibraryUnload(self, library):
        self.calls.append(("cuLibraryUnload", library))
        del self.libraries[library]
        return (0,)

    # -- the C entry points ----------
    def cuGetProcAddress(self, symbol, version, flags):
        """The C entry points an op replay and the stream ordering call (``_driver.entry``):
        C-callables over this driver's methods, so what they pass the driver is recorded as the
        driver gets it."""
        found = self._c_entries.get(symbol)
        if found is None:
            return (0, 0, 0)
        return (0, ctypes.cast(found, ctypes.c_void_p).value, 0)

    def _current_from_c(self, out: Any) -> int:
        """cuCtxGetCurrent as the compiled call asks it (a test may replace the method)."""
        try:
            err, ctx = self.cuCtxGetCurrent()
            out[0] = ctx
            return int(err)
        except Exception as exc:
            self.c_errors.append(exc)
            return UNKNOWN

    def _from_c(self, name: str) -> Any:
        """Method ``name`` (looked up per call: a test may replace it) called from C (a NULL
        handle arrives as None: 0 here), its result code answered; an exception is kept
        (``c_errors``) and answered as CUDA_ERROR_UNKNOWN."""

        def called(*args: Any) -> int:
            try:
                return int(getattr(self, name)(*(0 if a is None else a for a in args))[0])
            except Exception as exc:
                self.c_errors.append(exc)
                return UNKNOWN

        return called

    def _launch_from_c(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        """cuLaunchKernel as an op replay calls it, through its C entry point (NULL pointers
        arrive as None): recorded with its pointer array and a copy of the words it points at
        now, as the driver reads them (decoded by :func:`launch_words`); the views are made once
        per parameter block, so a recorded launch costs few Python calls. An exception cannot
        cross back into C: it is kept (``c_errors``) and answered as CUDA_ERROR_UNKNOWN."""
        try:
            if stream in self.capturing:  # a node of the words launched
                shape = (gx, gy, gz, bx, by, bz, shared)
                kernel = self.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
                self.node(stream, kernel, f, node_words(params, f), shape)
            views = self._blocks.get(params)
            if views is None or (views[0] and views[0][0] != views[2]):  # new block, same place
                views = self._blocks[params] = _block_views(params or 0, len(PARAM_SIZES[f]))
            if self.copy_words:  # the block may be freed before it is read
                views = (list(views[0]), list(views[1]), views[2])
            self.calls.append(("cuLaunchKernel", (f, (gx, gy, gz), (bx, by, bz), shared, views)))
        except Exception as exc:
            self.c_errors.append(exc)
            return UNKNOWN
        return self.launch_result


def _block_views(params: int, n: int) -> tuple[Any, Any, int]:
    """ctypes views of a parameter block: its pointer array, the words it points at, and where
    they were (a block freed and another made at its address points elsewhere)."""
    if not n:
        return (), (), 0
    pointers = (ctypes.c_uint64 * n).from_address(params)
    return pointers, (ctypes.c_uint64 * n).from_address(pointers[0]), pointers[0]


def launch_words(views: tuple[Any, Any, int]) -> list[int]:
    """The 8-byte parameter words of the last launch of a parameter block; checks that its
    pointer array points at them one after the other (how an op replay packs its block)."""
    pointers, words, _ = views
    assert all(p == pointers[0] + 8 * i for i, p in enumerate(pointers))
    return list(words)


@contextmanager
def recording_driver() -> Iterator[FakeDriver]:
    """``drv()`` answers with a FakeDriver of one GPU, its context current, for the block, and a
    runtime's cuda.core view of its stream is the stream's handle (cuda.core would load the
    real driver)."""
    recording = FakeDriver(1, thread_context=CTX)
    saved, driver._driver = driver._driver, recording
    saved_view, _launch.stream_fn = _launch.stream_fn, lambda handle: ("stream", handle)
    try:
        yield recording
    finally:
        driver._driver = saved
        _launch.stream_fn = saved_view


def stand_in_runtime(host: Any) -> CudaRuntime:
    """A CudaRuntime over the recording driver (device 0 of one stand-in GPU), made by its
    constructor; its construction's driver calls are not kept."""
    fake = driver._driver
    assert isinstance(fake, FakeDriver), "make it inside recording_driver()"
    rt = CudaRuntime(0, host, driver=fake)
    fake.calls.clear()
    return rt


#: The example's add op, whose stand-in module every StandIn has.
ADD = "ext_add_kernel.add"
#: The add kernel's parameters: out, lhs, rhs pointers and an int.
ADD_PARAMS = (8, 8, 8, 4)


class StandIn(NamedTuple):
    """A host and its stand-in CUDA runtime with the add op's module loaded; ``launches``: what
    cuda.core's launch was asked (the full path), ``fake``: the recording driver (op replays)."""

    host: tf.Host
    rt: CudaRuntime
    fake: FakeDriver
    launches: list[tuple[Any, ...]]
    module: Module


@contextmanager
def stand_in() -> Iterator[StandIn]:
    """A :class:`StandIn` for the block: the driver and cuda.core's launch recorded."""
    with recording_driver() as fake, recorded_launches() as launches:
        host = tf.Host()
        rt = stand_in_runtime(host)
        module = stand_in_module(rt, ADD_PARAMS)
        rt.resources.get((ADD, "module"), lambda: module)
        yield StandIn(host, rt, fake, launches, module)


def stand_in_module(rt: CudaRuntime, param_sizes: tuple[int, ...]) -> Module:
    """A module loaded by the runtime from an image the recording driver reads as the sizes of
    its kernels' parameters (every kernel of it takes ``param_sizes``)."""
    return load_image(rt, bytes(param_sizes), "cubin", "stand-in")


@contextmanager
def recorded_launches() -> Iterator[list[tuple[Any, ...]]]:
    """cuda.core's ``launch`` replaced by a recorder for the block."""
    launches: list[tuple[Any, ...]] = []

    def launch(*call: Any) -> None:
        launches.append(call)
        fake = driver._driver
        if isinstance(fake, FakeDriver) and STREAM in fake.capturing:
            _stream, config, kernel, *args = call  # captured: a kernel node of its arguments
            func = _CORE_FUNCTIONS.setdefault(kernel, next(_handles))
            data = [
                a.tobytes() if hasattr(a, "tobytes") else int(a).to_bytes(8, "little") for a in args
            ]
            PARAM_SIZES[func] = tuple(len(d) for d in data)
            shape = (*config.grid, *config.block, config.shmem_size)
            fake.node(STREAM, 0, func, [int.from_bytes(d, "little") for d in data], shape)

    saved, _launch.launch_fn = _launch.launch_fn, launch
    try:
        yield launches
    finally:
        _launch.launch_fn = saved

"""The provider SPI: everything a backend or op plugin builds on, from one front.

Stability: *provider SPI, version 1* — versioned separately from the user API. A backend
plugin subclasses :class:`Runtime` (storage primitives), :class:`ExecSession` (its execution
authority) and uses :class:`Session`/:class:`SessionHandle` for everything it issues, the
:class:`ResourceCache` for bounded caches of device resources, a :class:`Memo` (of a declared
:class:`MemoKind`) for bounded in-process memos and the :class:`KernelCache`
(:func:`active_kernel_cache`) to keep compiled kernels across processes. Lifetimes have one home
here: a collected :class:`DeviceStorage` queues its release on its runtime's
:class:`DeferredReleases`, carried out at the next drain point; a :class:`FreeList` keeps freed
blocks for reuse; the :class:`RetirementQueue` holds each :class:`Lease` (an object, and how it
is let go) until its event completes. An op call's seam fills the thread's
:class:`OpRecording` (``RECORDING.rec``) and :meth:`Runtime.op_replay` turns it into an
:class:`OpReplay` (answering :data:`REPLAY_MISS` when its guard fails); :func:`cached_probe`
keeps a probe's answer across processes, keyed on driver files. The DLPack C structs
(:class:`DLManagedTensorVersioned` ...) have one ctypes definition here, for every capsule a
backend or the host makes or reads.
A DSL (JIT) provider subclasses :class:`JitSession` and reads the typed IR of
:mod:`tenferro_host.kernel.ir` (the DSL's one public SPI module). A plugin marks its hooks with
:data:`hookimpl` and registers a :class:`BackendProvider` (whose probe answers a
:class:`BackendStatus`), a DSL session factory and its ops on the :class:`RegistrationView` its
``tenferro_host_register`` hook receives, with its compile-only targets (:class:`CompileOptions`
in, :class:`CompiledKernel` out). Every module behind this front is private. A plugin declares
the SPI version it was built for as ``TENFERRO_HOST_SPI = (1, 0)``; the loader refuses one whose
major differs or whose minor is newer than :data:`SPI_VERSION`.
"""

from .._memo import Memo, MemoKind, MemoStats, memo, memo_kinds, memo_stats
from ..facade import lazy_names
from ..layout import compact_strides, numel
from ._cache import ResourceCache
from ._capture import Capture, CapturedGraph, Slot
from ._capture_lock import refuse_in_capture
from ._compile_targets import CompiledKernel, CompileFn, CompileOptions, SourceCompileFn
from ._compiled import FALLBACK, DriverLaunchCore, UfuncCore
from ._counters import STAT_KEYS, Counters, TransferRecord
from ._deferred import DeferredReleases, DeviceStorage, Release
from ._exec_session import ExecSession, exec_session_of
from ._free_list import FreeList
from ._hookspecs import hookimpl
from ._host_services import HostServices
from ._op_plan import RECORDING, REPLAY_MISS, JitLaunchRecord, OpRecording
from ._op_replay import OpReplay
from ._registry import BackendProvider, BackendStatus, RegistrationView
from ._residency import require_resident
from ._retirement import Lease, RetirementQueue
from ._runtime import Runtime, normalize_shape
from ._session import BackendSession, Session, SessionHandle
from ._storage import Storage, require_writable

SPI_VERSION = (1, 0)

# The kernel cache, the DLPack structs and the JIT session base (which needs the DSL) load on
# first use: importing the host must not pay for them.
_LAZY = {
    **{
        name: f"{__name__}._kernel_cache"
        for name in (
            "CachedKernel",
            "KernelCache",
            "KernelCacheWarning",
            "KernelKey",
            "active_kernel_cache",
        )
    },
    "cached_probe": f"{__name__}._probe_cache",
    **{
        name: f"{__name__}._dlpack"
        for name in (
            "CapsuleDestructor",
            "DLPACK_FLAG_BITMASK_READ_ONLY",
            "DL_TYPE_CODES",
            "KDL_CPU",
            "KDL_CUDA",
            "DLDataType",
            "DLDeleter",
            "DLDevice",
            "DLManagedTensor",
            "DLManagedTensorVersioned",
            "DLPackVersion",
            "DLTensor",
            "DLVersionedDeleter",
            "capsule_is_valid",
            "capsule_new",
            "capsule_pointer",
            "capsule_set_name",
            "dl_dtype",
        )
    },
    **{
        name: f"{__name__}._jit_session"
        for name in (
            "Grid",
            "JitBinding",
            "JitLaunch",
            "JitSession",
            "convert_scalar",
            "fold_grid",
        )
    },
}
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DL_TYPE_CODES",
    "FALLBACK",
    "KDL_CPU",
    "KDL_CUDA",
    "RECORDING",
    "REPLAY_MISS",
    "SPI_VERSION",
    "STAT_KEYS",
    "BackendProvider",
    "BackendSession",
    "BackendStatus",
    "CachedKernel",
    "CapsuleDestructor",
    "Capture",
    "CapturedGraph",
    "CompileFn",
    "CompileOptions",
    "CompiledKernel",
    "Counters",
    "DLDataType",
    "DLDeleter",
    "DLDevice",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackVersion",
    "DLTensor",
    "DLVersionedDeleter",
    "DeferredReleases",
    "DeviceStorage",
    "DriverLaunchCore",
    "ExecSession",
    "FreeList",
    "Grid",
    "HostServices",
    "JitBinding",
    "JitLaunch",
    "JitLaunchRecord",
    "JitSession",
    "KernelCache",
    "KernelCacheWarning",
    "KernelKey",
    "Lease",
    "Memo",
    "MemoKind",
    "MemoStats",
    "OpRecording",
    "OpReplay",
    "RegistrationView",
    "Release",
    "ResourceCache",
    "RetirementQueue",
    "Runtime",
    "Session",
    "SessionHandle",
    "Slot",
    "SourceCompileFn",
    "Storage",
    "TransferRecord",
    "UfuncCore",
    "active_kernel_cache",
    "cached_probe",
    "capsule_is_valid",
    "capsule_new",
    "capsule_pointer",
    "capsule_set_name",
    "compact_strides",
    "convert_scalar",
    "dl_dtype",
    "exec_session_of",
    "fold_grid",
    "hookimpl",
    "memo",
    "memo_kinds",
    "memo_stats",
    "normalize_shape",
    "numel",
    "refuse_in_capture",
    "require_resident",
    "require_writable",
]

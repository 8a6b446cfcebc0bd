"""The provider SPI: what a backend plugin builds on.

Stability: *provider SPI, version 1* — versioned separately from the user API. A backend
plugin subclasses :class:`Runtime` (storage primitives), :class:`ExecSession` (its execution
authority) and uses :class:`Session`/:class:`SessionHandle` for everything it issues, the
:class:`ResourceCache` for bounded caches and the :class:`KernelCache`
(:func:`active_kernel_cache`) to keep compiled kernels across processes. Lifetimes have one home
here: a collected :class:`DeviceStorage` queues its release on its runtime's
:class:`DeferredReleases`, carried out at the next drain point; a :class:`FreeList` keeps freed
blocks for reuse; the :class:`RetirementQueue` holds each :class:`Lease` (an object, and how it
is let go) until its event completes. An op call's seam fills the thread's
:class:`OpRecording` (``RECORDING.rec``) and :meth:`Runtime.op_replay` turns it into a replay
(answering :data:`REPLAY_MISS` when its guard fails); :func:`cached_probe` keeps a probe's answer
across processes, keyed on driver files.
A DSL (JIT) provider subclasses :class:`JitSession` and reads the typed IR of
:mod:`tenferro_host.kernel.ir`. Registration goes through :mod:`.registry`
(:class:`~.registry.RegistrationView`) and :mod:`.hookspecs` (``hookimpl``). A plugin declares
the SPI version it was built for as ``TENFERRO_HOST_SPI = (1, 0)``; the loader refuses one whose
major differs or whose minor is newer than :data:`SPI_VERSION`.
"""

from ..facade import lazy_names
from ._op_plan import RECORDING, REPLAY_MISS, OpRecording
from .cache import ResourceCache
from .capture import Capture, CapturedGraph, Slot, refuse_in_capture
from .counters import STAT_KEYS, Counters, TransferRecord
from .deferred import DeferredReleases, DeviceStorage, Release
from .free_list import FreeList
from .host_services import HostServices
from .residency import require_resident
from .retirement import Lease, RetirementQueue
from .runtime import Runtime, normalize_shape
from .session import BackendSession, ExecSession, Session, SessionHandle, exec_session_of
from .storage import Storage, require_writable

SPI_VERSION = (1, 0)

# The kernel cache and the JIT session base (which needs the DSL) load on first use: importing
# the host must not pay for them.
_LAZY = {
    **{
        name: f"{__name__}.kernel_cache"
        for name in (
            "CachedKernel",
            "KernelCache",
            "KernelCacheWarning",
            "KernelKey",
            "active_kernel_cache",
            "cached_probe",
            "convert_scalar",
        )
    },
    "cached_probe": f"{__name__}._probe_cache",
    **{
        name: f"{__name__}._jit_session"
        for name in ("Grid", "JitBinding", "JitLaunch", "JitSession", "convert_scalar", "fold_grid")
    },
}
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "RECORDING",
    "REPLAY_MISS",
    "SPI_VERSION",
    "STAT_KEYS",
    "BackendSession",
    "CachedKernel",
    "Capture",
    "CapturedGraph",
    "Counters",
    "DeferredReleases",
    "DeviceStorage",
    "ExecSession",
    "FreeList",
    "Grid",
    "HostServices",
    "JitBinding",
    "JitLaunch",
    "JitSession",
    "KernelCache",
    "KernelCacheWarning",
    "KernelKey",
    "Lease",
    "OpRecording",
    "Release",
    "ResourceCache",
    "RetirementQueue",
    "Runtime",
    "Session",
    "SessionHandle",
    "Slot",
    "Storage",
    "TransferRecord",
    "active_kernel_cache",
    "cached_probe",
    "convert_scalar",
    "exec_session_of",
    "fold_grid",
    "normalize_shape",
    "refuse_in_capture",
    "require_resident",
    "require_writable",
]

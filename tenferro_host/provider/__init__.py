"""The provider SPI: what a backend plugin builds on.

Stability: *provider SPI, version 1* — versioned separately from the user API. A backend
plugin subclasses :class:`Runtime` (storage primitives), :class:`ExecSession` (its execution
authority) and uses :class:`Session`/:class:`SessionHandle` for everything it issues, the
:class:`RetirementQueue` for leases, the :class:`ResourceCache` for bounded caches and the
:class:`KernelCache` (:func:`active_kernel_cache`) to keep compiled kernels across processes.
"""

from ..facade import lazy_names
from .cache import ResourceCache
from .counters import STAT_KEYS, Counters, TransferRecord
from .residency import require_resident
from .retirement import Lease, RetirementQueue
from .runtime import Runtime, normalize_shape
from .session import BackendSession, ExecSession, Session, SessionHandle, exec_session_of
from .storage import Storage, require_writable

SPI_VERSION = (1, 0)

# The kernel cache loads on first use: importing the host must not pay for it.
_LAZY = {
    name: f"{__name__}.kernel_cache"
    for name in (
        "CachedKernel",
        "KernelCache",
        "KernelCacheWarning",
        "KernelKey",
        "active_kernel_cache",
    )
}
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "SPI_VERSION",
    "STAT_KEYS",
    "BackendSession",
    "CachedKernel",
    "Counters",
    "ExecSession",
    "KernelCache",
    "KernelCacheWarning",
    "KernelKey",
    "Lease",
    "ResourceCache",
    "RetirementQueue",
    "Runtime",
    "Session",
    "SessionHandle",
    "Storage",
    "TransferRecord",
    "active_kernel_cache",
    "exec_session_of",
    "normalize_shape",
    "require_resident",
    "require_writable",
]

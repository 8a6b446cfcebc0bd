"""The provider SPI: what a backend plugin builds on.

Stability: *provider SPI, version 1* — versioned separately from the user API. A backend
plugin subclasses :class:`Runtime` (storage primitives), :class:`ExecSession` (its execution
authority) and uses :class:`Session`/:class:`SessionHandle` for everything it issues, the
:class:`RetirementQueue` for leases and the :class:`ResourceCache` for bounded caches.
"""

from .cache import ResourceCache
from .counters import STAT_KEYS, Counters, TransferRecord
from .residency import require_resident
from .retirement import Lease, RetirementQueue
from .runtime import Runtime, normalize_shape
from .session import BackendSession, ExecSession, Session, SessionHandle, exec_session_of
from .storage import Storage

SPI_VERSION = (1, 0)

__all__ = [
    "SPI_VERSION",
    "STAT_KEYS",
    "BackendSession",
    "Counters",
    "ExecSession",
    "Lease",
    "ResourceCache",
    "RetirementQueue",
    "Runtime",
    "Session",
    "SessionHandle",
    "Storage",
    "TransferRecord",
    "exec_session_of",
    "normalize_shape",
    "require_resident",
]

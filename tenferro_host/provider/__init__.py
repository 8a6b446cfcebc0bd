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

from .._memo import Memo, MemoKind, MemoStats, ResourceCache, memo, memo_kinds, memo_stats
from ..facade import lazy_names
from ..layout import compact_strides, is_compact, numel, span
from . import (
    _capture,
    _capture_lock,
    _capture_record,
    _captured_graph,
    _compile_targets,
    _compiled,
    _counters,
    _deferred,
    _dlpack,
    _exec_session,
    _free_list,
    _hookspecs,
    _host_services,
    _op_plan,
    _op_replay,
    _registry,
    _residency,
    _retirement,
    _runtime,
    _session,
    _storage,
)
from ._capture import *  # noqa: F403 - each module's __all__ is its share of the SPI
from ._capture_lock import *  # noqa: F403
from ._capture_record import *  # noqa: F403
from ._captured_graph import *  # noqa: F403
from ._compile_targets import *  # noqa: F403
from ._compiled import *  # noqa: F403
from ._counters import *  # noqa: F403
from ._deferred import *  # noqa: F403
from ._dlpack import *  # noqa: F403
from ._exec_session import *  # noqa: F403
from ._free_list import *  # noqa: F403
from ._hookspecs import *  # noqa: F403
from ._host_services import *  # noqa: F403
from ._op_plan import *  # noqa: F403
from ._op_replay import *  # noqa: F403
from ._registry import *  # noqa: F403
from ._residency import *  # noqa: F403
from ._retirement import *  # noqa: F403
from ._runtime import *  # noqa: F403
from ._session import *  # noqa: F403
from ._storage import *  # noqa: F403

SPI_VERSION = (1, 0)

#: What loads on first use, by module: importing the host must not pay for the kernel cache
#: or the JIT session base (which needs the DSL). Each name is in its
#: module's ``__all__`` (a test holds the two together).
LAZY = {
    "_kernel_cache": (
        "CachedKernel",
        "KernelCache",
        "KernelCacheWarning",
        "KernelKey",
        "active_kernel_cache",
    ),
    "_probe_cache": ("cached_probe",),
    "_jit_session": (
        "Grid",
        "JitBinding",
        "JitLaunch",
        "JitSession",
        "convert_scalar",
        "fold_grid",
    ),
}
__getattr__, __dir__ = lazy_names(
    __name__,
    {name: f"{__name__}.{module}" for module, names in LAZY.items() for name in names},
    globals(),
)

__all__ = [
    "SPI_VERSION",
    # the host's own names the SPI passes on: memos, and the layout rules a backend follows
    "Memo",
    "MemoKind",
    "MemoStats",
    "ResourceCache",
    "compact_strides",
    "is_compact",
    "memo",
    "memo_kinds",
    "memo_stats",
    "numel",
    "span",
]
__all__ += [name for names in LAZY.values() for name in names]
__all__ += _capture.__all__
__all__ += _capture_record.__all__
__all__ += _captured_graph.__all__
__all__ += _capture_lock.__all__
__all__ += _compile_targets.__all__
__all__ += _compiled.__all__
__all__ += _counters.__all__
__all__ += _deferred.__all__
__all__ += _dlpack.__all__
__all__ += _exec_session.__all__
__all__ += _free_list.__all__
__all__ += _hookspecs.__all__
__all__ += _host_services.__all__
__all__ += _op_plan.__all__
__all__ += _op_replay.__all__
__all__ += _registry.__all__
__all__ += _residency.__all__
__all__ += _retirement.__all__
__all__ += _runtime.__all__
__all__ += _session.__all__
__all__ += _storage.__all__

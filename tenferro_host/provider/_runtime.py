"""Runtime base: one backend instance with its own allocation domain, stream and counters.

``host.backend(name)`` returns a Runtime. Providers subclass it and implement the primitive
``_``-methods (allocate, write, read, fill, copy); the user API above them — upload, empty,
zeros, download, canonicalize, stats — is shared so every backend behaves alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import layout
from .._memo import Memo, MemoKind, memo
from ..capability import ExtensionCapability
from ..dtypes import DType, dtype
from ..errors import BackendError, ShapeError, UnsupportedError, ValidationError
from ..identity import AllocationDomainId, RuntimeIdentity
from ..tensor import Tensor
from ._capture_lock import refuse_in_capture
from ._counters import Counters, TransferRecord
from ._deferred import DeferredReleases, Release
from ._exec_session import ExecSession
from ._op_plan import LAUNCH_PLANS
from ._residency import require_resident
from ._retirement import RetirementQueue
from ._session import _UNRESOLVED, BackendSession
from ._storage import Storage

if TYPE_CHECKING:
    from ._capture_record import NativeCapture
    from ._host_services import HostServices
    from ._op_plan import OpRecording
    from ._op_replay import OpReplay


_INT_ONLY = frozenset({int})
_AFTER = "do it after the capture's block (or replay the graph, then download)"
#: Compact strides of recently allocated shapes (normalized: tuples of ints only).
_COMPACT_STRIDES: Memo[tuple[int, ...], tuple[int, ...]] = memo(
    "provider.compact_strides", 1024, what="compact strides by shape"
)
_EMPTY_PLANS = MemoKind("provider.empty_plans", 1024, what="a runtime's (dtype, shape) layouts")


def normalize_shape(shape: Any) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints, or ShapeError."""
    if type(shape) is tuple and _INT_ONLY.issuperset(map(type, shape)):  # noqa: SIM102 - hot path
        if not shape or min(shape) >= 0:  # the common case, checked in C
            return shape
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError as exc:
        raise ShapeError(
            f"shape must be a sequence of ints, got {shape!r}", argument="shape"
        ) from exc
    if not all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        raise ShapeError(f"shape must hold non-negative ints, got {shape!r}", argument="shape")
    return tuple(int(d) for d in dims)


class Runtime(ABC):
    """A backend instance: device, allocation domain, stream, counters, retirement queue and
    the deferred releases its collected storages and modules queue."""

    #: dtypes this backend stores; providers narrow it.
    supported_dtypes: frozenset[str] = frozenset(
        {
            "float32",
            "float64",
            "float16",
            "int32",
            "uint32",
            "int64",
            "bool",
            "complex64",
            "complex128",
        }
    )

    #: The capture open on this runtime (``ex.capture()``), which locks it; None: none.
    active_capture: Any = None
    #: Whether this backend turns recorded op calls into replays (it overrides
    #: :meth:`op_replay`); the plan table keeps every call of one that does not on the full path.
    replays_ops = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.replays_ops = cls.op_replay is not Runtime.op_replay

    def __init__(
        self, host: HostServices, kind: str, index: int, *, software: bool = False
    ) -> None:
        self.host = host
        self.kind = kind
        self.index = index
        #: the tokens of the threads with a backend session of this runtime open (``_session``:
        #: one a thread); an op handle's "none open anywhere" is one attribute, without a lock
        self._session_threads: set[object] = set()
        self.active_capture = None  # an instance attribute: read on every planned op call
        self.software = software
        #: 1 for ``host.backend(name)``; 2, 3 ... for each ``host.new_backend`` of one device
        self.instance = 1
        self.identity = RuntimeIdentity.new()
        self.domain = AllocationDomainId.new()
        self.counters = Counters()
        self.retirement = RetirementQueue(
            self.counters, is_done=self._event_done, wait=self._event_wait
        )
        #: Releases queued by finalizers on any thread; carried out by :meth:`drain_deferred`.
        self.deferred = DeferredReleases()
        self._capabilities: dict[ExtensionCapability, bool] | None = None
        self._jit_factory: Any = _UNRESOLVED  # ex.jit's factory, asked of the host once
        #: (dtype as given, shape) -> (DType, compact strides, nbytes) of shapes allocated before
        self._empty_plans: Memo[tuple[Any, tuple[int, ...]], tuple[DType, Any, int]] = (
            _EMPTY_PLANS.new()
        )
        #: planned DSL launches by launch key (``JitSession.launch``)
        self.launch_plans: Memo[Any, Any] = LAUNCH_PLANS.new()

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``kind:index``, with ``#n`` for the n-th runtime of one device (``cpu:0#2``)."""
        base = f"{self.kind}:{self.index}"
        return base if self.instance == 1 else f"{base}#{self.instance}"

    @property
    @abstractmethod
    def device(self) -> object:
        """The device this runtime runs on (value semantics)."""

    @property
    @abstractmethod
    def device_info(self) -> Any:
        """Limits and properties of the device."""

    def same_device(self, other: Runtime) -> bool:
        """True when ``other`` runs on the same physical device (UUID, not ordinal)."""
        return self.kind == other.kind and self.device == other.device

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # -- capabilities, stats -------------------------------------------------------------------
    def capabilities(self) -> dict[ExtensionCapability, bool]:
        """What this backend plausibly offers (answered by its provider's hook)."""
        if self._capabilities is None:
            caps = dict.fromkeys(ExtensionCapability, False)
            caps.update(self.host.provider_capabilities(self))
            caps[ExtensionCapability.JIT_KERNEL] = self.host.jit_factory(self.kind) is not None
            self._capabilities = caps
        return self._capabilities

    def stats(self) -> dict[str, int]:
        """Counters with the documented keys (docs/contract.md)."""
        return self.counters.snapshot()

    def transfer_trace(self) -> list[TransferRecord]:
        """Every data movement of this runtime, oldest first (bounded)."""
        return list(self.counters.trace)

    def check_usable(self) -> None:
        """Raise if the runtime can no longer run work (e.g. a poisoned context)."""

    def op_replay(self, recording: OpRecording) -> OpReplay | None:
        """Provider hook: a replay of the recorded op call (called with the call's tensors, it
        returns the outputs or ``MISS``; its ``signature`` compares recordings), or None when
        this backend cannot replay it (the op then stays on the full path). The op handle asks
        only for a recording that launched and returned its outputs, none of them empty."""
        return None

    def capture_refusal(self) -> str | None:
        """Provider hook: why this runtime cannot open a capture now (e.g. debug waits)."""
        return None

    def native_capture(self) -> NativeCapture | None:
        """Provider hook: the device graph an ``ex.capture()`` records into, or None where a
        capture replays its recorded op calls one by one (docs/capture.md)."""
        return None

    # -- sessions ------------------------------------------------------------------------------
    def session(self) -> BackendSession:
        """A backend session bound to the calling thread."""
        return BackendSession(self)

    def new_exec_session(self, backend_session: BackendSession) -> ExecSession:
        """Provider hook: the exec session type of this backend."""
        return ExecSession(backend_session)

    # -- creation and transfer -----------------------------------------------------------------
    def _check_dtype(self, dt: DType) -> DType:
        if dt.name not in self.supported_dtypes:
            raise UnsupportedError(
                f"backend {self.name!r} does not store {dt.name}; "
                f"supported: {', '.join(sorted(self.supported_dtypes))}",
                backend=self.name,
                feature=dt.name,
            )
        return dt

    def _new_tensor(self, dt: DType, shape: tuple[int, ...]) -> Tensor:
        strides, nbytes = self._layout(dt, shape)
        storage = self._allocate(nbytes, dt) if nbytes else Storage(self, 0)
        return Tensor(storage, dt, shape, strides, 0, True)

    @staticmethod
    def _layout(dt: DType, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
        """Compact strides and byte size of a normalized ``shape`` of ``dt`` (memoized)."""
        strides = _COMPACT_STRIDES.get(shape)
        if strides is None:
            strides = _COMPACT_STRIDES.put(shape, layout.compact_strides(shape))
        return strides, layout.numel(shape) * dt.itemsize

    def empty(self, dt: Any, shape: Any) -> Tensor:
        """A fresh compact tensor, uninitialised.

        A (dtype, shape) seen before — the shape a tuple of plain ints — skips the checks it
        already passed: its layout is looked up once per call (the hot path of every op).
        """
        if type(shape) is tuple and _INT_ONLY.issuperset(map(type, shape)):
            plan = self._empty_plans.get((dt, shape))
            if plan is not None:
                dt_, strides, nbytes = plan
                storage = self._allocate(nbytes, dt_) if nbytes else Storage(self, 0)
                return Tensor(storage, dt_, shape, strides, 0, True)
        dt_ = self._check_dtype(dtype(dt))
        shape = normalize_shape(shape)
        strides, nbytes = self._layout(dt_, shape)
        if type(dt) in (DType, str):  # hashable and equal only to the same dtype
            self._empty_plans.put((dt, shape), (dt_, strides, nbytes))
        storage = self._allocate(nbytes, dt_) if nbytes else Storage(self, 0)
        return Tensor(storage, dt_, shape, strides, 0, True)

    def zeros(self, dt: Any, shape: Any) -> Tensor:
        """A fresh compact tensor filled with zeros (stream-ordered on GPUs)."""
        t = self.empty(dt, shape)
        if t.storage.nbytes:
            self._fill_zero(t.storage)
        return t

    def upload(self, array: Any) -> Tensor:
        """Copy a host array into a fresh compact tensor (asynchronous on GPUs)."""
        try:
            host = np.asarray(array)
        except (ValueError, TypeError) as exc:  # ragged nesting, objects numpy cannot stack
            raise ValidationError(
                f"upload needs an array or a rectangular nested list of numbers: {exc}",
                argument="array",
            ) from exc
        dt = self._check_dtype(dtype(host.dtype))
        t = self._new_tensor(dt, tuple(host.shape))
        if t.storage.nbytes:
            flat = np.ascontiguousarray(host.reshape(-1, order="F")).view(np.uint8)
            self._write(t.storage, flat)
            self.counters.add("uploads")
            self.counters.record(TransferRecord("upload", t.storage.nbytes, "host", self.name))
        return t

    def download(self, t: Tensor) -> np.ndarray:
        """Copy a tensor of this runtime into a new numpy array with the same shape."""
        if t.storage.runtime is not self:
            raise ValidationError(
                f"tensor belongs to {t.storage.runtime.name!r}, not {self.name!r}", argument="t"
            )
        if self.active_capture is not None:
            refuse_in_capture(self, "a download (a host wait)", _AFTER)
        npd = t.dtype.numpy
        if t.numel == 0:
            return np.empty(t.shape, dtype=npd)
        lo, hi = t.span()
        raw = self._read(t.storage, lo * t.dtype.itemsize, (hi - lo) * t.dtype.itemsize)
        self.counters.add("downloads")
        self.counters.record(TransferRecord("download", raw.nbytes, self.name, "host"))
        flat = raw.view(npd)
        isz = t.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(
            flat[t.offset - lo :],
            shape=t.shape,
            strides=tuple(s * isz for s in t.strides),
            writeable=False,
        )
        return np.array(view, order="F")

    def canonicalize(self, t: Tensor) -> Tensor:
        """A compact copy of ``t`` on the same device; no host round trip."""
        require_resident(self, t, argument="t", op="canonicalize")
        out = self._new_tensor(t.dtype, t.shape)
        if t.numel:
            self._copy_to_compact(t, out)
            self.counters.add("d2d_copies")
            self.counters.record(TransferRecord("d2d", out.nbytes, self.name, self.name))
        return out

    def synchronize(self) -> None:
        """Wait for all work on this runtime (counted in ``synchronizations``)."""
        if self.active_capture is not None:
            refuse_in_capture(self, "a synchronization", _AFTER)
        self.counters.add("synchronizations")
        self._synchronize()
        self.retirement.poll()

    def drain_deferred(self) -> None:
        """Carry out the releases collected storages and modules queued (a drain point: the
        backend calls it at allocation and session entry, and at ``trim`` and ``close``).
        Held while a capture holds the retirement queue: a release would be a node of the graph."""
        if self.deferred and self.retirement.refuse_wait is None:
            self._release_deferred(self.deferred.take_all())

    # -- interop -------------------------------------------------------------------------------
    def from_dlpack(self, x: Any) -> Tensor:
        """Import a foreign buffer as storage of kind "imported" in this runtime's domain."""
        raise UnsupportedError(
            f"backend {self.name!r} cannot import DLPack buffers",
            backend=self.name,
            feature="dlpack",
        )

    def borrow(
        self,
        ptr: int,
        dt: DType,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        owner: Any = None,
        read_only: bool = False,
    ) -> Tensor:
        """A framework's device buffer at ``ptr`` as a tensor with no DLPack capsule (a framework
        bridge's per-call import); this base refuses (UnsupportedError)."""
        raise UnsupportedError(
            f"backend {self.name!r} cannot borrow a framework's buffer by its pointer",
            backend=self.name,
            feature="borrow",
        )

    def export_dlpack(self, t: Tensor, stream: Any, **kwargs: Any) -> Any:
        """A DLPack capsule of ``t``; this base refuses (UnsupportedError)."""
        raise UnsupportedError(
            f"backend {self.name!r} cannot export DLPack buffers",
            backend=self.name,
            feature="dlpack",
        )

    def dlpack_device(self) -> tuple[int, int]:
        """The DLPack (device type, id); this base refuses (UnsupportedError)."""
        raise UnsupportedError(
            f"backend {self.name!r} has no DLPack device", backend=self.name, feature="dlpack"
        )

    # -- provider primitives -------------------------------------------------------------------
    @abstractmethod
    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        """A new storage of ``nbytes`` (> 0) for elements of ``dt`` in this runtime's domain."""

    def output_allocator(self, nbytes: int, dt: DType) -> Callable[[], Storage]:
        """What an op replay calls per call for an output of ``nbytes`` (> 0) bytes of ``dt``:
        the class's :meth:`_allocate` bound to them (never an instance's: a framework's output
        allocator is the runtime's only while its bridge call runs, and ``OpReplay.allocate``
        asks for it then); a backend binds what it can decide once instead."""
        return partial(type(self)._allocate, self, nbytes, dt)

    @abstractmethod
    def _write(self, storage: Storage, data: np.ndarray) -> None:
        """Copy host bytes (uint8, contiguous) to the start of ``storage``."""

    @abstractmethod
    def _read(self, storage: Storage, byte_offset: int, nbytes: int) -> np.ndarray:
        """Host copy (uint8) of a byte range; waits for pending work on GPUs."""

    @abstractmethod
    def _fill_zero(self, storage: Storage) -> None:
        """Zero the whole storage, ordered after earlier work."""

    @abstractmethod
    def _copy_to_compact(self, src: Tensor, dst: Tensor) -> None:
        """Copy a (possibly strided) view into the compact ``dst`` on the device."""

    def _release_deferred(self, releases: list[Release]) -> None:
        """Carry out queued ``(kind, handle)`` releases; a backend whose storages are
        :class:`~.deferred.DeviceStorage` (or whose objects queue releases) implements it."""
        raise BackendError(
            f"{self.name}: {len(releases)} releases were queued but "
            f"{type(self).__name__} does not implement _release_deferred"
        )

    def _synchronize(self) -> None:
        """Provider hook: wait for the runtime's stream or queue."""

    def _event_done(self, event: Any) -> bool:
        return True

    def _event_wait(self, event: Any) -> None:
        """Block until ``event`` completes (only the retirement queue's oldest, when full)."""


__all__ = ["Runtime", "normalize_shape"]

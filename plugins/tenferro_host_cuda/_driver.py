"""Thin, typed access to the CUDA driver through ``cuda.bindings``.

``cuda.bindings`` is imported on first use, never at import time, so the provider imports on
machines without a GPU or without cuda-python. Every driver result goes through :func:`check`,
which turns error codes into the typed errors of :mod:`tenferro_host.errors` and records sticky
faults: after one, the device's primary context is poisoned for every runtime in the process and
:func:`require_healthy` raises :class:`~tenferro_host.errors.ContextPoisonedError`.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tenferro_host import (
    BackendError,
    ContextPoisonedError,
    CudaDeviceUuid,
    OutOfMemoryError,
    UnsupportedError,
)

_driver: ModuleType | None = None

#: Driver error codes after which the context is unusable until the process ends.
STICKY_FAULTS = frozenset({214, 700, 702, 710, 714, 715, 716, 717, 718, 719})
#: Their names, to recognise them in the messages of libraries that raise (cuda.core).
STICKY_FAULT_NAMES = (
    "CUDA_ERROR_ECC_UNCORRECTABLE",
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_LAUNCH_FAILED",
)
OUT_OF_MEMORY = 2
NOT_READY = 600
NOT_FOUND = 500

#: The reason ``caps`` gives when libcuda cannot be loaded.
NO_DRIVER = "no NVIDIA driver found (libcuda.so.1)"

#: UUID of each poisoned device -> the fault that poisoned it (empty: every device healthy).
POISONED: dict[bytes, str] = {}
_poison_lock = threading.Lock()


def drv() -> ModuleType:
    """``cuda.bindings.driver``, imported and initialised on first use."""
    global _driver
    if _driver is None:
        if sys.platform.startswith("linux"):  # no libcuda: say so before importing the bindings
            try:
                ctypes.CDLL("libcuda.so.1")
            except OSError as exc:
                raise _no_driver() from exc
        from cuda.bindings import driver
        from cuda.pathfinder import DynamicLibNotFoundError

        try:
            (err,) = driver.cuInit(0)
        except DynamicLibNotFoundError as exc:  # the loader's words stay in __cause__
            raise _no_driver() from exc
        if int(err) != 0:
            raise BackendError(f"cuInit failed: {error_name(err, driver)}")
        _driver = driver
    return _driver


def _no_driver() -> UnsupportedError:
    return UnsupportedError(
        f"{NO_DRIVER}; install the NVIDIA driver to use the cuda backend, or use another backend",
        backend="cuda",
        feature="driver",
        reason=NO_DRIVER,
    )


def entry(name: str, driver: Any = None) -> Callable[..., int]:
    """The C function ``name`` of ``driver`` (default: the process's, :func:`drv`), resolved
    once through ``cuGetProcAddress``.

    A hot path (an op replay's launch) calls it with prebuilt ctypes arguments, so no argument
    is converted per call as the bindings' wrapper converts each; it answers the ``CUresult``
    as an int (check it with :func:`failure`) and releases the GIL during the call, as the
    bindings do. Resolved again when the driver object changes (the tests' stand-in).
    """
    d = driver if driver is not None else _driver or drv()
    found = _ENTRIES.get(name)
    if found is None or found[0] is not d:
        version = check(d.cuDriverGetVersion(), "cuDriverGetVersion")
        flags = d.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
        address, _ = check(d.cuGetProcAddress(name.encode(), version, flags), name)
        if not address:
            raise BackendError(f"the CUDA driver (version {version}) has no {name}")
        found = _ENTRIES[name] = (d, ctypes.CFUNCTYPE(ctypes.c_int)(int(address)))
    return found[1]


def address(function: Any) -> int:
    """An entry point's C address (what a compiled core calls)."""
    return ctypes.cast(function, ctypes.c_void_p).value or 0


#: Each resolved entry point with the driver object it came from.
_ENTRIES: dict[str, tuple[Any, Callable[..., int]]] = {}


def nvrtc_bindings() -> ModuleType:
    """``cuda.bindings.nvrtc``, imported on first use (UnsupportedError where it is missing)."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise UnsupportedError(
            f"NVRTC is not available ({exc}); pip install 'tenferro-host[cuda]'",
            backend="cuda",
            feature="RUNTIME_COMPILATION",
        ) from exc
    return nvrtc


def error_name(err: Any, driver: ModuleType | None = None) -> str:
    """``CUDA_ERROR_X (code): description`` for a driver result."""
    d = driver or _driver
    code = int(err)
    if d is None:
        return f"CUresult {code}"
    try:
        err = d.CUresult(code)
    except ValueError:
        return f"CUresult {code}"
    _, name = d.cuGetErrorName(err)
    _, text = d.cuGetErrorString(err)
    name_s = name.decode() if isinstance(name, bytes) else str(name)
    text_s = text.decode() if isinstance(text, bytes) else str(text)
    return f"{name_s} ({code}): {text_s}"


def poison(uuid: bytes, why: str) -> None:
    """Mark the device ``uuid`` poisoned (a sticky fault happened on it)."""
    with _poison_lock:
        POISONED.setdefault(uuid, why)


def poisoned_devices() -> dict[bytes, str]:
    """Every poisoned device's UUID with the fault that poisoned it."""
    with _poison_lock:
        return dict(POISONED)


def initialised() -> bool:
    """Whether this process has initialised the driver (through :func:`drv`)."""
    return _driver is not None


def require_healthy(uuid: bytes, op: str | None = None) -> None:
    """Raise ContextPoisonedError if a sticky fault poisoned the device ``uuid``."""
    why = POISONED.get(uuid)
    if why is not None:
        ident = CudaDeviceUuid(uuid)
        raise ContextPoisonedError(
            f"the primary context of CUDA device {ident} is poisoned by an earlier fault "
            f"({why}); no further work can run on it in this process — restart the process",
            device_uuid=ident,
            op=op,
        )


def check(
    result: Any,
    what: str,
    *,
    uuid: bytes | None = None,
    op: str | None = None,
    error: type[BackendError] = BackendError,
    describe: Callable[[Any], str] | None = None,
) -> Any:
    """Unpack a result tuple ``(err, *values)`` of ``cuda.bindings``; raise a typed error on
    failure. The one checker of the CUDA plugin: driver results by default, another library's
    (NVRTC) with ``describe`` naming its codes.

    Returns None, the single value, or the tuple of values.
    """
    err = result[0]
    code = int(err)
    if code != 0:
        if describe is not None:
            raise error(f"{what} failed: {describe(err)}", op=op)
        raise failure(err, what, uuid=uuid, op=op, error=error)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def failure(
    err: Any,
    what: str,
    *,
    uuid: bytes | None = None,
    op: str | None = None,
    error: type[BackendError] = BackendError,
) -> Exception:
    """The typed exception for a failed driver call (poisoning the device on sticky faults)."""
    code = int(err)
    name = error_name(err)
    if code in STICKY_FAULTS and uuid is not None:
        poison(uuid, f"{name} during {what}")
        return ContextPoisonedError(
            f"{what} failed with {name}; a kernel faulted earlier and poisoned the device's "
            "primary context — restart the process (run with TENFERRO_DEBUG_SYNC=1 to find "
            "the faulting launch)",
            device_uuid=CudaDeviceUuid(uuid),
            op=op,
        )
    if code == OUT_OF_MEMORY:
        return OutOfMemoryError(f"{what} failed: {name}", op=op)
    return error(f"{what} failed: {name}", op=op)


class PrimaryContext:
    """Makes a device's primary context current for a block and restores the previous one.

    The switch is skipped when the primary context is already current (it costs ~2 µs).
    Reentrant per thread by construction: each ``enter`` returns what ``exit`` restores.
    """

    __slots__ = ("_ctx", "_handle")

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._handle = int(ctx)

    @property
    def handle(self) -> Any:
        return self._ctx

    def enter(self) -> Any:
        """Make the primary context current; return the context to restore, or None."""
        d = _driver or drv()
        err, current = d.cuCtxGetCurrent()
        if not err and int(current) == self._handle:
            return None
        if err:
            raise failure(err, "cuCtxGetCurrent")
        check(d.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
        return current

    def forget_if_destroyed(self, dev: Any) -> None:
        """Make no context current if this one is and releasing the last retain destroyed it.

        The thread keeps a destroyed primary context as its current one: the next user of the
        thread (CuPy, torch) would fail with CUDA_ERROR_INVALID_CONTEXT. A primary context still
        retained by someone else (the CUDA runtime, another runtime) stays current.
        """
        d = drv()
        current = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) != self._handle:
            return
        _, active = check(d.cuDevicePrimaryCtxGetState(dev), "cuDevicePrimaryCtxGetState")
        if not active:
            check(d.cuCtxSetCurrent(d.CUcontext(0)), "cuCtxSetCurrent (none)")

    @staticmethod
    def exit(saved: Any) -> None:
        """Restore what ``enter`` returned (None: nothing was switched)."""
        if saved is not None:
            check(drv().cuCtxSetCurrent(saved), "cuCtxSetCurrent (restore)")

    def __enter__(self) -> Any:
        saved = self.enter()
        _stack().append(saved)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.exit(_stack().pop())


_tls = threading.local()


def _stack() -> list[Any]:
    stack = getattr(_tls, "saved", None)
    if stack is None:
        stack = _tls.saved = []
    return stack


__all__ = [
    "NOT_FOUND",
    "NOT_READY",
    "OUT_OF_MEMORY",
    "POISONED",
    "STICKY_FAULTS",
    "STICKY_FAULT_NAMES",
    "PrimaryContext",
    "check",
    "drv",
    "error_name",
    "failure",
    "nvrtc_bindings",
    "poison",
    "require_healthy",
]

"""The typed error hierarchy.

Every error says what was wrong and what to do. ``op`` names the operation that was running
when the error was raised (``None`` outside an operation). Each class also subclasses the
builtin exception a caller would catch for it, so ``except ValueError`` around a host call keeps
working: ``ValidationError`` is a ``ValueError`` (``DTypeError`` also a ``TypeError``),
``RuntimeStateError`` and ``BackendError`` are ``RuntimeError``, ``UnsupportedError`` is a
``NotImplementedError`` and ``OutOfMemoryError`` is a ``MemoryError``.
"""

from __future__ import annotations

from typing import Any


class TenferroError(Exception):
    """Base of every error tenferro-host raises on purpose."""

    def __init__(self, message: str, *, op: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.op = op

    def __str__(self) -> str:
        return f"[{self.op}] {self.message}" if self.op else self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields, not by calling __init__ again: a subclass's own required
        # keyword arguments survive pickling (a Ray actor's error reaches its caller this way).
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[TenferroError], args: tuple[Any, ...], fields: dict[str, Any]) -> Any:
    # Made by the builtin whose memory layout the class has (OSError's, for a TimeoutError).
    make = OSError.__new__ if issubclass(cls, OSError) else Exception.__new__
    error = make(cls)
    error.args = args
    error.__dict__.update(fields)
    return error


class ValidationError(TenferroError, ValueError):
    """A wrong argument; ``argument`` names it."""

    def __init__(self, message: str, *, argument: str | None = None, op: str | None = None) -> None:
        super().__init__(message, op=op)
        self.argument = argument


class InvalidLayoutError(ValidationError):
    """A tensor's layout does not fit the call (e.g. a non-compact view on a compact-only path)."""


class InvalidLaunchConfigError(ValidationError):
    """A grid, block or shared-memory size the device or function cannot take."""


class ArgumentMismatchError(ValidationError):
    """Kernel arguments whose count or byte sizes differ from the kernel's parameters."""


class AliasingError(ValidationError):
    """An exclusive borrow overlapping another borrow of the same storage."""


class DTypeError(ValidationError, TypeError):
    """A dtype the call does not accept."""


class ShapeError(ValidationError):
    """A shape the call does not accept."""


class RuntimeStateError(TenferroError, RuntimeError):
    """The call is valid but the runtime or session state forbids it now."""


class HostActorDiedError(RuntimeStateError):
    """A remote host actor that died (killed, crashed, its node lost) under a call; ``actor``
    names it. Its tensors went with it: restart the actor or start a new pool. Unlike Ray's
    transient ``ActorUnavailableError``, this one does not come back."""

    def __init__(self, message: str, *, actor: str | None = None, op: str | None = None) -> None:
        super().__init__(message, op=op)
        self.actor = actor


class CallTimeoutError(RuntimeStateError, TimeoutError):
    """A remote call not answered within its ``timeout_s``; ``actor`` names the host actor, which
    may still be running it (wait longer, or restart the actor)."""

    def __init__(
        self,
        message: str,
        *,
        actor: str | None = None,
        timeout_s: float | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(message, op=op)
        self.actor = actor
        self.timeout_s = timeout_s


class RemoteOpError(TenferroError):
    """An exception raised in a host actor that could not be rebuilt in the caller (its class
    is not importable here, or does not pickle): ``error_type`` names it, the message is its
    text, ``remote_traceback`` is where it was raised. The actor lives on."""

    def __init__(
        self,
        message: str,
        *,
        actor: str | None = None,
        error_type: str = "",
        remote_traceback: str = "",
        op: str | None = None,
    ) -> None:
        super().__init__(message, op=op)
        self.actor = actor
        self.error_type = error_type
        self.remote_traceback = remote_traceback


class ForeignRuntimeError(RuntimeStateError):
    """A tensor owned by another allocation domain than the session's runtime."""


class SessionClosedError(RuntimeStateError):
    """A session, or a handle it issued, used after the session ended."""


class WrongThreadError(RuntimeStateError):
    """A session object used from a thread other than the one that created it."""


class ContextPoisonedError(RuntimeStateError):
    """A sticky device fault poisoned the device's primary context; restart the process."""

    def __init__(self, message: str, *, device_uuid: Any = None, op: str | None = None) -> None:
        super().__init__(message, op=op)
        self.device_uuid = device_uuid


class CaptureError(RuntimeStateError):
    """Something a capture cannot hold: a blocking point, a compile, another thread's session,
    a replay tensor that does not fit its slot. ``fix`` says what to do instead."""

    def __init__(self, message: str, *, op: str | None = None, fix: str | None = None) -> None:
        super().__init__(message if fix is None else f"{message}; {fix}", op=op)
        self.fix = fix


class UnsupportedError(TenferroError, NotImplementedError):
    """A backend that cannot do something: ``feature`` names it, ``reason`` says why."""

    def __init__(
        self,
        message: str,
        *,
        backend: str | None = None,
        feature: str | None = None,
        reason: str | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(message, op=op)
        self.backend = backend
        self.feature = feature
        self.reason = reason if reason is not None else message


class BackendError(TenferroError, RuntimeError):
    """The backend library failed; its own exception is kept as ``__cause__``."""


class CompileError(BackendError):
    """A kernel source that did not compile; ``log`` holds the compiler's words."""

    def __init__(
        self,
        message: str,
        *,
        log: str = "",
        options: tuple[str, ...] | list[str] = (),
        line: int | None = None,
        column: int | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(message, op=op)
        self.log = log
        self.options = tuple(options)
        self.line = line
        self.column = column


class ModuleLoadError(BackendError):
    """A module image the driver rejected (bad bytes, wrong architecture, PTX too new)."""


class SymbolLookupError(BackendError):
    """A kernel name missing from a loaded module."""


class LaunchError(BackendError):
    """A launch the driver refused, or a fault reported by the debug mode."""


class SynchronizeError(BackendError):
    """Waiting for a stream or device failed."""


class PeerAccessError(BackendError):
    """A peer copy between devices that cannot access each other."""


class OutOfMemoryError(BackendError, MemoryError):
    """An allocation the device could not satisfy; ``nbytes`` and ``pool_stats`` say how much.

    ``limit`` names the device limit the request exceeds (e.g. WebGPU's ``max_buffer_size``),
    so no amount of freeing helps; None when the memory itself ran out.
    """

    def __init__(
        self,
        message: str,
        *,
        nbytes: int = 0,
        pool_stats: dict[str, int] | None = None,
        limit: str | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(message, op=op)
        self.nbytes = nbytes
        self.pool_stats = dict(pool_stats or {})
        self.limit = limit


class PluginError(TenferroError):
    """A plugin that failed to load, register or validate (fatal only in strict mode)."""


class RuleError(PluginError):
    """An op's rule (``rule``: ``dtype_rule``, ``shape_rule``, ``reduction_length``,
    ``shapes``) that raised something other than a typed error: the op package's bug, always
    raised; the rule's own exception is kept as ``__cause__``."""

    def __init__(self, message: str, *, rule: str | None = None, op: str | None = None) -> None:
        super().__init__(message, op=op)
        self.rule = rule


class DslError(TenferroError):
    """Kernel DSL source the front-end cannot compile, located at file:line:column."""

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        lineno: int | None = None,
        col_offset: int | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(message, op=op)
        self.filename = filename
        self.lineno = lineno
        self.col_offset = col_offset

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}:{self.col_offset}: " if self.filename else ""
        return where + super().__str__()


__all__ = [
    "AliasingError",
    "ArgumentMismatchError",
    "BackendError",
    "CallTimeoutError",
    "CaptureError",
    "CompileError",
    "ContextPoisonedError",
    "DTypeError",
    "DslError",
    "ForeignRuntimeError",
    "HostActorDiedError",
    "InvalidLaunchConfigError",
    "InvalidLayoutError",
    "LaunchError",
    "ModuleLoadError",
    "OutOfMemoryError",
    "PeerAccessError",
    "PluginError",
    "RemoteOpError",
    "RuleError",
    "RuntimeStateError",
    "SessionClosedError",
    "ShapeError",
    "SymbolLookupError",
    "SynchronizeError",
    "TenferroError",
    "UnsupportedError",
    "ValidationError",
    "WrongThreadError",
]

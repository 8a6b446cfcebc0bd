"""Session base classes: thread binding, invalidation and nesting rules (docs/contract.md).

Every session object is bound to the thread that created it. When a session ends, it and every
sub-session and handle it issued become invalid: a handle checks its session on each use, so
invalidation costs nothing at exit. A runtime has at most one open backend session per thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import (
    RuntimeStateError,
    SessionClosedError,
    WrongThreadError,
)
from ._capture_lock import locked
from ._op_plan import RECORDING

if TYPE_CHECKING:
    from ..tensor import Tensor
    from ._exec_session import ExecSession
    from ._runtime import Runtime

_NEW, _OPEN, _CLOSED = 0, 1, 2
_per_thread = threading.local()
_get_ident = threading.get_ident
#: A runtime's JIT factory before its first ``ex.jit``.
_UNRESOLVED: Any = object()


def thread_token() -> object:
    """This thread's token in ``Runtime._session_threads`` (an object, not the thread's id: a
    thread that died with a session open leaves a token no later thread has)."""
    try:
        return _per_thread.token
    except AttributeError:
        token = _per_thread.token = object()
        return token


class Session:
    """A scoped, thread-bound grant of execution authority on one runtime.

    Subclasses override ``_on_enter`` and ``_on_exit``; sub-sessions pass their parent so that
    closing the parent closes them too. ``_owner`` is the opening thread's id while the session
    is open and None otherwise, so one comparison with the caller's thread id checks both
    rules (open, and used from its own thread) on every use of a handle.
    """

    kind_name = "session"

    def __init__(self, runtime: Runtime, op: str | None = None, parent: Session | None = None):
        self.runtime = runtime
        self.op = op
        self.parent = parent
        self._thread = _get_ident()
        self._owner: int | None = None
        self._state = _NEW
        self._children: list[Session] | None = None  # made by the first child: none is common
        if parent is not None:
            if parent._owner != self._thread:
                parent._check()
            if parent._children is None:
                parent._children = [self]
            else:
                parent._children.append(self)

    @property
    def closed(self) -> bool:
        """Whether the session has been exited."""
        return self._state == _CLOSED

    def _check(self) -> None:
        """Raise unless this session is open and used from its own thread."""
        if self._owner != _get_ident():
            raise self._refusal()

    def _refusal(self) -> Exception:
        if self._state != _OPEN:
            what = "has ended" if self._state == _CLOSED else "was not entered yet"
            return SessionClosedError(
                f"this {self.kind_name} {what}; use handles only inside their `with` block",
                op=self.op,
            )
        return WrongThreadError(
            f"this {self.kind_name} belongs to another thread; open a session on this one",
            op=self.op,
        )

    def _open(self) -> None:
        if self._state != _NEW or self._thread != _get_ident():
            self._refuse_entry()
        parent = self.parent
        if parent is not None and parent._owner != self._thread:
            parent._check()
        self._state = _OPEN
        self._owner = self._thread
        try:
            self._on_enter()
        except BaseException:
            self._state = _CLOSED
            self._owner = None
            raise

    def _refuse_entry(self) -> None:
        if self._thread != _get_ident():
            raise WrongThreadError(
                f"this {self.kind_name} was created on another thread; create it where you use it",
                op=self.op,
            )
        raise RuntimeStateError(
            f"this {self.kind_name} was already entered; sessions are single-use, create a new one",
            op=self.op,
        )

    def _close(self, error: BaseException | None) -> None:
        if self._state != _OPEN:
            return
        try:
            children = self._children
            if children is not None:
                self._children = None
                for child in reversed(children):
                    child._close(error)
            self._on_exit(error)
        finally:
            self._state = _CLOSED
            self._owner = None
            parent = self.parent
            if parent is not None:
                siblings = parent._children
                if siblings is not None and self in siblings:
                    siblings.remove(self)  # ended: the parent has nothing left to close here

    def __enter__(self) -> Any:
        self._open()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._thread != _get_ident():
            raise WrongThreadError(
                f"this {self.kind_name} must end on the thread that opened it", op=self.op
            )
        self._close(exc)

    def _on_enter(self) -> None:
        """Provider hook: acquire what the session needs."""

    def _on_exit(self, error: BaseException | None) -> None:
        """Provider hook: submit, record completion, release; never synchronize on success."""


class OutputSession(Session):
    """A session a variant allocates an op call's outputs through (the CPU exec session, every
    JIT session): one ``alloc_output`` for all of them."""

    def alloc_output(self, dtype: Any, shape: Any) -> Tensor:
        """A fresh compact tensor of this runtime, uninitialised (stream-ordered on GPUs): an
        output of the op call (a slot of its recording, when one is being recorded)."""
        if self._owner != _get_ident():
            raise self._refusal()
        out = self.runtime.empty(dtype, shape)
        rec = RECORDING.rec
        if rec is not None:
            out = rec.output(out)
        return out


class SessionHandle:
    """Something a session issued (a tensor ref, a stream ref, ...): valid only inside it."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    def _check(self) -> None:
        self._session._check()

    @property
    def session(self) -> Session:
        """The session that issued this handle."""
        return self._session


class BackendSession(Session):
    """``backend.session()``: the entry to execution on one runtime, bound to this thread."""

    kind_name = "backend session"

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._exec: ExecSession | None = None
        self._token: object = None  # this thread's token while open (``thread_token``)

    def _on_enter(self) -> None:
        runtime = self.runtime
        capture = runtime.active_capture
        if capture is not None and capture._owner != _get_ident():
            raise locked(runtime)
        opened, me = runtime._session_threads, thread_token()
        if me in opened:
            raise RuntimeStateError(
                f"a session of runtime {runtime.name!r} is already open on this thread; "
                "an op that needs another op calls ex.run(op, ...) inside its session"
            )
        runtime.check_usable()
        if runtime.deferred:  # a drain point: what was collected since is released first
            runtime.drain_deferred()
        runtime.retirement.poll()
        opened.add(me)
        self._token = me
        try:
            self._exec = runtime.new_exec_session(self)
            self._exec._open()
            services = runtime.host
            if services.observes_sessions:
                services.session_started(self)
        except BaseException as exc:
            opened.discard(me)
            if self._exec is not None:
                self._exec._close(exc)  # release what the exec session acquired on entry
            raise

    def _on_exit(self, error: BaseException | None) -> None:
        self.runtime._session_threads.discard(self._token)
        self._exec = None  # no cycle left with its exec session: both are freed by refcount
        services = self.runtime.host
        if services.observes_sessions:
            services.session_finished(self, error)

    def exec_session(self) -> ExecSession:
        """The exec session of this backend session (whatever its kind)."""
        if self._owner != _get_ident():
            self._check()
        assert self._exec is not None
        return self._exec


__all__ = ["BackendSession", "OutputSession", "Session", "SessionHandle"]

"""The caller's side of one host actor: remote calls, their results as Ray object refs, and the
error rules.

A tensor result is the ``ObjectRef`` of the call that made it: ``ray.get``, ``ray.wait`` and
``await`` take it as any ref, another call takes it as an argument (Ray resolves it to its
tensor's address in the actor: see :class:`TensorHandle`), and its tensors live in the actor as
long as Ray's own reference counting keeps the ref in scope — the caller's copies of it, and
every task that was given it, until that task ends. Ray tells the ref's owner when it goes out
of scope (the callback Ray Data uses for its blocks); :class:`_Releaser` sends the call keys of
those refs back to their actors in batches, one ``release`` task per actor and batch.

A :class:`Pending` is any other call in flight; ``result()`` waits for it, at most a timeout. An
error raised in the actor comes back as itself (the typed errors pickle their fields) with the
actor's traceback as a note; one that cannot be rebuilt here is a ``RemoteOpError``. A call
not answered in time is a ``CallTimeoutError`` (a ``TimeoutError``), one whose actor died a
``HostActorDiedError``, one after the Ray connection ended a ``RuntimeStateError``; nothing
waits forever and nothing starts a Ray cluster behind the caller's back.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import (
    CallTimeoutError,
    HostActorDiedError,
    RemoteOpError,
    RuntimeStateError,
    UnsupportedError,
    ValidationError,
)
from ._worker import HostWorker
from .caps import ActorCaps

#: Seconds a call waits for its result unless told otherwise.
DEFAULT_TIMEOUT_S = 300.0
#: Seconds the releaser lets out-of-scope keys gather before it sends them: a release task
#: costs an actor about what a call does, so a busy caller's releases come one per many calls.
RELEASE_BATCH_S = 0.05
#: The longest pause between two looks at calls in flight in :func:`wait` (how late a failure
#: among many calls may be raised).
WAIT_POLL_S = 0.05


def import_ray() -> Any:
    """The ``ray`` module, or an UnsupportedError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise UnsupportedError(
            f"tenferro_host.distributed needs Ray: pip install 'tenferro-host[ray]' ({exc})",
            feature="ray",
        ) from exc
    return ray


def connected_ray() -> Any:
    """The ``ray`` module while its connection is up; a RuntimeStateError otherwise (Ray's
    auto-init would start a new local cluster, which knows none of the pool's actors)."""
    ray = import_ray()
    if not ray.is_initialized():
        raise RuntimeStateError(
            "the Ray connection is shut down: the pool's actors and tensors went with it; "
            "ray.init() again and start a new pool"
        )
    return ray


def connection_lost(what: str, actor: str) -> RuntimeStateError:
    """The error of a call whose Ray connection was shut down while the caller waited."""
    return RuntimeStateError(
        f"the Ray connection was shut down while waiting for {what} on host actor {actor}; "
        "ray.init() again and start a new pool"
    )


def translate(exc: BaseException, actor: str, what: str, timeout_s: float | None) -> BaseException:
    """The error a caller sees for Ray's ``exc`` from ``what`` on ``actor``."""
    from ray import exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause
        remote = getattr(exc, "traceback_str", None) or str(exc)  # Ray's own text of it
        if isinstance(cause, Exception) and not isinstance(cause, rex.RayError):
            cause.add_note(f"raised in host actor {actor} by {what}:\n{remote}")
            return cause
        return _not_rebuilt(remote, actor, what)
    if isinstance(exc, rex.UnserializableException):
        return _not_rebuilt(exc._original_stack_trace, actor, what)
    if isinstance(exc, rex.GetTimeoutError):
        return CallTimeoutError(
            f"host actor {actor} did not answer {what} within {timeout_s} s; it may still be "
            "running it: wait longer (timeout_s=...), or restart the actor "
            "(RemoteHost.restart())",
            actor=actor,
            timeout_s=timeout_s,
        )
    if not import_ray().is_initialized():
        return connection_lost(what, actor)
    said = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return HostActorDiedError(
        f"host actor {actor} died before {what} finished ({type(exc).__name__}: "
        f"{said[-1] if said else 'no reason given'}); its tensors are lost: restart it "
        "(RemoteHost.restart()) or start a new pool",
        actor=actor,
    )


def _not_rebuilt(remote: str, actor: str, what: str) -> RemoteOpError:
    """An exception raised in the actor that Ray could not rebuild here, from its text (whose
    last line is Python's ``Type: message``)."""
    said = [line.strip() for line in remote.splitlines() if line.strip()]
    last = said[-1] if said else "an exception"
    error_type = last.split(":", 1)[0] if ":" in last else last
    return RemoteOpError(
        f"{what} on host actor {actor} raised {last} (Ray could not rebuild it here: make its "
        "class importable and picklable in the caller); the actor lives on",
        actor=actor,
        error_type=error_type.rsplit(".", 1)[-1],
        remote_traceback=remote,
    )


@contextlib.contextmanager
def _shutdown_typed(ray: Any, what: str, actor: str) -> Iterator[None]:
    """Ray shut down under a wait in this block (it raises ``SystemExit`` then, which would end
    the caller's program with status 0 mid-work) as the typed error."""
    try:
        yield
    except SystemExit as exc:
        if ray.is_initialized():
            raise
        raise connection_lost(what, actor) from exc


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (a ``time.monotonic()``; None: no bound), at least 0."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Pending:
    """A remote call in flight; another remote call may take it (or its ``ref``) as an
    argument unwaited. ``tensors``: the call keeps tensors, so its result is its ref."""

    def __init__(self, ref: Any, actor: str, what: str, *, tensors: bool = False) -> None:
        self.ref = ref
        self.actor = actor
        self.what = what
        self.tensors = tensors

    def result(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Any:
        """The call's result (for a call that made tensors, its ``ObjectRef`` once done; else
        its value: an array, caps ...), or its error."""
        value = self._value(connected_ray(), timeout_s)
        return self.ref if self.tensors else value

    def _value(self, ray: Any, timeout_s: float | None) -> Any:
        try:
            with _shutdown_typed(ray, self.what, self.actor):
                return ray.get(self.ref, timeout=timeout_s)
        except ray.exceptions.RayError as exc:
            raise translate(exc, self.actor, self.what, timeout_s) from None

    def __repr__(self) -> str:
        return f"<Pending {self.what} on {self.actor}>"


def wait(pending: Sequence[Any], timeout_s: float | None = DEFAULT_TIMEOUT_S) -> list[Any]:
    """Every result, in order (a ``Pending``'s as ``result()`` gives it, a bare ref's value).
    The first call to fail raises its error (as :func:`translate` says) once it has failed,
    without waiting for the others; ``timeout_s`` bounds the whole. Linear in the number of
    calls: ``ray.wait`` over all of them, at most every ``WAIT_POLL_S``."""
    ray = connected_ray()
    calls = [p if isinstance(p, Pending) else Pending(p, "?", "a remote call") for p in pending]
    by_ref = {p.ref: p for p in calls}
    values: dict[Any, Any] = {}
    left = list(by_ref)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pause = 0.001
    while left:
        left_s = remaining(deadline)
        step = pause if left_s is None else min(pause, left_s)
        with _shutdown_typed(ray, calls[0].what, calls[0].actor):
            ready, left = ray.wait(left, num_returns=len(left), timeout=step)
        if ready:
            try:
                with _shutdown_typed(ray, calls[0].what, calls[0].actor):
                    values.update(zip(ready, ray.get(ready), strict=True))
            except ray.exceptions.RayError:
                for ref in ready:  # which one failed: its own error, as itself
                    values[ref] = by_ref[ref]._value(ray, None)
        elif left_s == 0.0:
            first = by_ref[left[0]]
            raise translate(ray.exceptions.GetTimeoutError(), first.actor, first.what, timeout_s)
        pause = min(pause * 2, WAIT_POLL_S)
    return [p.ref if p.tensors else values[p.ref] for p in calls]


def wait_any(ray: Any, pending: Sequence[Pending], timeout_s: float | None) -> list[Pending]:
    """The calls of ``pending`` that are done (at least one; their errors raised), waiting at
    most ``timeout_s`` for the first."""
    by_ref = {p.ref: p for p in pending}
    with _shutdown_typed(ray, pending[0].what, pending[0].actor):
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=timeout_s)
        ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
    if not ready:
        first = pending[0]
        raise translate(ray.exceptions.GetTimeoutError(), first.actor, first.what, timeout_s)
    for ref in ready:
        by_ref[ref]._value(ray, None)
    return [by_ref[r] for r in ready]


class _Releaser:
    """Sends the call keys of refs Ray found out of scope back to their actors, batched.

    Ray calls the callback :meth:`track` registers on its own thread, which must not block: it
    only queues the key. A daemon thread sends what gathered within ``RELEASE_BATCH_S`` as one
    ``release`` task per actor (after the calls that made them: Ray runs one caller's tasks on an
    actor in order).
    """

    def __init__(self) -> None:
        self._queue: collections.deque[tuple[RemoteHost, str]] = collections.deque()
        self._woken = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def track(self, ray: Any, ref: Any, host: RemoteHost, call: str) -> None:
        """Release ``call`` on ``host`` once ``ref`` (which this process owns) is out of scope."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="tenferro-ray-releaser", daemon=True
                    )
                    self._thread.start()
        worker = ray._private.worker.global_worker.core_worker
        if not worker.add_object_out_of_scope_callback(ref, lambda _id: self._queued(host, call)):
            self._queued(host, call)  # already out of scope

    def _queued(self, host: RemoteHost, call: str) -> None:
        self._queue.append((host, call))
        self._woken.set()

    def _run(self) -> None:
        ray = import_ray()
        while True:
            self._woken.wait()
            time.sleep(RELEASE_BATCH_S)
            self._woken.clear()
            batches: dict[RemoteHost, list[str]] = {}
            while self._queue:
                host, call = self._queue.popleft()
                batches.setdefault(host, []).append(call)
            if not ray.is_initialized():
                continue  # the cluster, its actors and their tensors are gone
            for host, calls in batches.items():
                with contextlib.suppress(Exception):  # a dead actor's tensors went with it
                    host.actor.release.remote(calls)


_RELEASER = _Releaser()
#: This process's prefix of call keys: keys stay unique across every caller of an actor.
_CALLER = uuid.uuid4().hex[:12]
_COUNTER = itertools.count()


#: The host actor's Ray concurrency group for calls that must be answered while its main
#: thread is blocked (``collective_abort`` of a join or collective waiting for a dead rank).
CONTROL_GROUP = "control"


def start_actor(ray: Any, backend: str, options: dict[str, Any], probe_p2p: bool) -> Any:
    """A new host actor of ``backend`` made with Ray actor ``options`` (resources, placement,
    restarts, ``runtime_env``, names ...), with one thread of its own for ``CONTROL_GROUP``
    (Ray takes concurrency groups only where the class is made remote, not in ``options``)."""
    worker = ray.remote(concurrency_groups={CONTROL_GROUP: 1})(HostWorker)
    return worker.options(**options).remote(backend, probe_p2p=probe_p2p)


def _ref(value: Any) -> Any:
    return value.ref if isinstance(value, Pending) else value


class RemoteHost:
    """One host actor as its caller sees it: calls whose tensor results are Ray object refs."""

    def __init__(
        self,
        actor: Any,
        actor_id: str,
        backend: str,
        options: dict[str, Any] | None = None,
        probe_p2p: bool = False,
    ) -> None:
        self.actor = actor
        self._run_method = actor.run  # made once: Ray makes a method object per lookup
        self.id = actor_id
        self.backend = backend
        self._options = dict(options or {})
        self._probe_p2p = probe_p2p
        self._caps: ActorCaps | None = None

    def __repr__(self) -> str:
        return f"<RemoteHost {self.id}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # A Ray task given the pool calls the same actors; its refs are its own (it owns them).
        return (RemoteHost, (self.actor, self.id, self.backend, self._options, self._probe_p2p))

    def restart(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> None:
        """Replace the actor by a new one made as it was (a hung call is ended with it; its
        tensors are lost, and its refs raise ``HostActorDiedError``); the pool keeps it."""
        ray = connected_ray()
        with contextlib.suppress(Exception):  # already dead
            ray.kill(self.actor)
        self.actor = start_actor(ray, self.backend, self._options, self._probe_p2p)
        self._run_method = self.actor.run
        self.id = Pending(self.actor.ping.remote(), self.id, "restart").result(timeout_s)
        self._caps = None

    # -- calls ---------------------------------------------------------------------------------
    def submit(self, method: str, *args: Any, **kwargs: Any) -> Pending:
        """Call the actor's ``method`` without waiting (``Pending`` and ref arguments are passed
        on). ``"run"`` and ``"upload"`` are :meth:`remote` and :meth:`upload`'s calls."""
        ray = connected_ray()
        if method == "run":
            op, *rest = args
            return self._run(ray, op, rest, kwargs, ())
        if method in ("upload", "run_arrays", "collective"):
            raise ValidationError(
                f"submit({method!r}, ...) would keep tensors no ref owns: call "
                f"RemoteHost.{'upload' if method == 'upload' else 'remote'} or the pool's "
                f"{'map' if method == 'run_arrays' else method}",
                argument="method",
            )
        ref = getattr(self.actor, method).remote(*map(_ref, args), **kwargs)
        return Pending(ref, self.id, method)

    def _call(self) -> str:
        return f"{_CALLER}:{next(_COUNTER)}"

    def _tensor_call(self, ray: Any, method: Any, call: str, what: str, *args: Any) -> Pending:
        """``method.remote(*args)`` of a call that keeps tensors under ``call``: tracked for
        release once its ref is out of scope."""
        ref = method.remote(*map(_ref, args))
        _RELEASER.track(ray, ref, self, call)
        return Pending(ref, self.id, what, tensors=True)

    def _run(
        self,
        ray: Any,
        op: str,
        args: Sequence[Any],
        attrs: dict[str, Any],
        reserved: tuple[str, ...],
    ) -> Pending:
        call = self._call()
        if attrs:
            head: Any = (call, op, attrs, reserved)
        elif reserved:
            head = f"{call}/{','.join(reserved)} {op}"
        else:
            head = f"{call} {op}"  # the common call's header: one short string
        return self._tensor_call(ray, self._run_method, call, f"run({op!r})", head, *args)

    def map_call(self, op: str, arrays: Sequence[np.ndarray], attrs: dict[str, Any]) -> Pending:
        """Upload ``arrays`` and run ``op`` on them in one call (a pool's ``map``)."""
        call = self._call()
        return self._tensor_call(
            connected_ray(), self.actor.run_arrays, call, f"map({op!r})", call, op, attrs, *arrays
        )

    def collective_call(self, name: str, tensor: Any, kwargs: dict[str, Any]) -> Pending:
        """Collective ``name`` of the actor's communicator on ``tensor`` (a pool's
        ``collective``)."""
        call = self._call()
        return self._tensor_call(
            connected_ray(), self.actor.collective, call, "collective", call, name, kwargs, tensor
        )

    def remote(self, op: str, /, *args: Any, **attrs: Any) -> Any:
        """Run ``op`` in the actor on tensors it holds (refs, handles or Pendings) without
        waiting: the result's ``ObjectRef``, which ``ray.get`` resolves to its tensor's address
        (a tuple of them for several outputs) and any call takes as an argument. Every keyword
        is the op's attribute."""
        return self._run(connected_ray(), op, args, attrs, ()).ref

    def run(
        self,
        op: str,
        /,
        *args: Any,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        **attrs: Any,
    ) -> Any:
        """:meth:`remote`, waited for at most ``timeout_s``: the result's ``ObjectRef``, or the
        call's typed error. An op that declares an attribute ``timeout_s`` takes it through
        :meth:`remote` (here it would be the call's; it is refused, not taken silently)."""
        pending = self._run(connected_ray(), op, args, attrs, ("timeout_s",))
        return pending.result(timeout_s)

    def upload(self, *arrays: np.ndarray, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Any:
        """Copy arrays into the actor's device: one ref per array (a tuple for several), each
        tensor living as long as its ref."""
        ray = connected_ray()
        calls = tuple(self._call() for _ in arrays)
        refs = self.actor.upload.options(num_returns=len(arrays)).remote(calls, *arrays)
        refs = list(refs) if len(arrays) > 1 else [refs]
        for ref, call in zip(refs, calls, strict=True):
            _RELEASER.track(ray, ref, self, call)
        wait([Pending(r, self.id, "upload", tensors=True) for r in refs], timeout_s)
        return tuple(refs) if len(refs) > 1 else refs[0]

    def download(self, tensor: Any, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Any:
        """A tensor's values (its ref, handle or Pending) as a numpy array."""
        return self.submit("download", tensor).result(timeout_s)

    def free(self, *tensors: Any, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> None:
        """Let the actor drop these tensors now, before their refs go out of scope."""
        self.submit("free", *tensors).result(timeout_s)

    def caps(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> ActorCaps:
        """The actor's capabilities (asked once, then kept)."""
        if self._caps is None:
            self._caps = self.submit("caps").result(timeout_s)
        return self._caps

    def stats(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> dict[str, int]:
        """The actor runtime's counters."""
        stats: dict[str, int] = self.submit("stats").result(timeout_s)
        return stats

    def held(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> int:
        """How many tensors the actor holds."""
        held: int = self.submit("held").result(timeout_s)
        return held


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Pending",
    "RemoteHost",
    "connected_ray",
    "import_ray",
    "remaining",
    "translate",
    "wait",
]

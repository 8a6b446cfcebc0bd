"""The caller's side of one host actor: remote calls, their results, and the error rules.

A call returns a :class:`Pending` at once; ``result()`` waits for it, at most a timeout. An error
raised in the actor comes back as itself: the same class with the same fields and message (the
typed errors pickle their fields), with the actor's traceback as a note. An actor that died, or
did not answer in time, is an ``ActorUnavailableError``; nothing waits forever.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ActorUnavailableError, UnsupportedError
from ._worker import TensorHandle
from .caps import ActorCaps

#: Seconds a call waits for its result unless told otherwise.
DEFAULT_TIMEOUT_S = 300.0


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


def translate(exc: BaseException, actor: str, what: str, timeout_s: float | None) -> BaseException:
    """The error a caller sees for Ray's ``exc`` from ``what`` on ``actor``."""
    from ray import exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause
        if isinstance(cause, Exception) and not isinstance(cause, rex.RayError):
            remote = getattr(exc, "traceback_str", None) or str(exc)  # Ray's own text of it
            cause.add_note(f"raised in host actor {actor} by {what}:\n{remote}")
            return cause
    if isinstance(exc, rex.GetTimeoutError):
        return ActorUnavailableError(
            f"host actor {actor} did not answer {what} within {timeout_s} s; it may still be "
            "running it: wait longer (timeout_s=...) or shut the pool down",
            actor=actor,
            reason="timed out",
        )
    said = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return ActorUnavailableError(
        f"host actor {actor} died before {what} finished ({type(exc).__name__}: "
        f"{said[-1] if said else 'no reason given'}); its tensors are lost: start a new pool",
        actor=actor,
        reason="died",
    )


def wait(pending: Sequence[Pending], timeout_s: float | None = DEFAULT_TIMEOUT_S) -> list[Any]:
    """Every result, in order. The first call to fail raises its error (as :func:`translate`
    says) as soon as it fails, without waiting for the others; ``timeout_s`` bounds the whole."""
    ray = import_ray()
    from ray import exceptions as rex

    by_ref = {p.ref: p for p in pending}
    left = list(by_ref)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while left:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, left = ray.wait(left, num_returns=1, timeout=remaining)
        if not ready:
            first = by_ref[left[0]]
            raise translate(rex.GetTimeoutError(), first.actor, first.what, timeout_s)
        by_ref[ready[0]].result(timeout_s=None)  # ready: raises its error now, if any
    return [p.result(timeout_s=None) for p in pending]


class Pending:
    """A remote call in flight; another remote call may take it as an argument unwaited."""

    def __init__(self, ref: Any, actor: str, what: str) -> None:
        self.ref = ref
        self.actor = actor
        self.what = what

    def result(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Any:
        """The call's result (a handle, a tuple of handles, an array ...), or its error."""
        ray = import_ray()
        try:
            return ray.get(self.ref, timeout=timeout_s)
        except ray.exceptions.RayError as exc:
            raise translate(exc, self.actor, self.what, timeout_s) from None

    def __repr__(self) -> str:
        return f"<Pending {self.what} on {self.actor}>"


def _ref(value: Any) -> Any:
    return value.ref if isinstance(value, Pending) else value


class RemoteHost:
    """One host actor as its caller sees it: submit work, wait for handles, download."""

    def __init__(self, actor: Any, actor_id: str, backend: str) -> None:
        self.actor = actor
        self.id = actor_id
        self.backend = backend
        self._caps: ActorCaps | None = None

    def __repr__(self) -> str:
        return f"<RemoteHost {self.id}>"

    def submit(self, method: str, *args: Any, **kwargs: Any) -> Pending:
        """Call the actor's ``method`` without waiting (``Pending`` arguments are passed on)."""
        ref = getattr(self.actor, method).remote(*map(_ref, args), **kwargs)
        return Pending(ref, self.id, method if method != "run" else f"run({args[0]!r})")

    def run(
        self, op: str, *args: Any, timeout_s: float | None = DEFAULT_TIMEOUT_S, **attrs: Any
    ) -> Any:
        """Run ``op`` in the actor on handles it holds; its tensors come back as handles."""
        return self.submit("run", op, *args, **attrs).result(timeout_s)

    def upload(self, *arrays: np.ndarray, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Any:
        """Copy arrays into the actor's device; a handle per array."""
        return self.submit("upload", *arrays).result(timeout_s)

    def download(self, handle: TensorHandle, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Any:
        """A handle's values as a numpy array."""
        return self.submit("download", handle).result(timeout_s)

    def free(self, *handles: TensorHandle, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> None:
        """Let the actor drop these tensors."""
        self.submit("free", *handles).result(timeout_s)

    def caps(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> ActorCaps:
        """The actor's capabilities (asked once, then kept)."""
        if self._caps is None:
            self._caps = self.submit("caps").result(timeout_s)
        return self._caps

    def stats(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> dict[str, int]:
        """The actor runtime's counters."""
        stats: dict[str, int] = self.submit("stats").result(timeout_s)
        return stats


__all__ = ["DEFAULT_TIMEOUT_S", "Pending", "RemoteHost", "import_ray", "translate", "wait"]

"""A handle's plan table: each call key's replay, or what the key's recordings gave so far.

The op handle looks a call's key up here (:meth:`PlanTable.find`). A key not planned yet takes
the full path recorded (:meth:`PlanTable.call_recorded`); the backend turns a clean recording
into a replay (``Runtime.op_replay``) and the key is planned once two consecutive recordings give
the same replay signature. A key recorded :data:`TRIES` times without a plan stays on the full
path, unrecorded, with the reason kept for ``handle.plans()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..dtypes import DType
from ..layout import is_compact
from ..tensor import Tensor
from ._op_plan import OpRecording, exact_kind, record_into, sharing
from ._session import thread_token

if TYPE_CHECKING:
    from ._runtime import Runtime

#: Recordings of one key before it stays on the full path; keys one table holds (more: cleared).
TRIES, MAX_PLANS = 4, 64


class Learning:
    """A call key not planned yet: how often it was recorded, the last replay signature, why."""

    __slots__ = ("signature", "tries", "why")

    def __init__(self, tries: int = 0, why: str | None = None) -> None:
        self.tries = tries
        self.signature: Any = None
        self.why = why

    @property
    def given_up(self) -> bool:
        """Recorded :data:`TRIES` times without a plan: the full path, unrecorded, from now."""
        return self.tries >= TRIES


#: The state of a key with an unhashable attribute: never recorded, never planned.
UNHASHABLE = Learning(TRIES, "an attribute is unhashable")
#: The state of any key while its runtime can neither replay nor record a call (a capture is
#: open, a session observer is set, or this thread has a session of it open): the full path.
BLOCKED: Any = object()


class PlanTable(dict[Any, Any]):
    """Call keys and their states (a replay or a :class:`Learning`), with the last key replayed
    beside them (``hot``: compared before a key is hashed); cleared together, so a dropped plan
    frees its modules."""

    __slots__ = ("hot",)

    def __init__(self) -> None:
        super().__init__()
        self.hot: tuple[Any, Any] = ((), None)

    def clear(self) -> None:
        self.hot = ((), None)
        super().clear()

    def find(self, tensors: tuple[Any, ...], attrs: dict[str, Any]) -> tuple[Any, Any]:
        """The call key of ``tensors`` and ``attrs`` and its state: a replay, a
        :class:`Learning`, None (new) or :data:`BLOCKED`; a key of None: the call is never keyed
        (an input that is not a Tensor: the full path says what is wrong).

        The key: per input its dtype, shape, strides, offset and runtime (the first input's
        runtime is ``key[4]``), which inputs share a storage where two do, per attribute its
        name, value and exact kind (``exact_kind``).
        """
        key: Any = ()
        for t in tensors:  # no call per tensor
            if type(t) is not Tensor:
                return None, None
            key += (t.dtype, t.shape, t.strides, t.offset, t.storage.runtime)
        n = len(tensors)  # which inputs share a storage is keyed (two: one compare)
        if n > 1 and (
            tensors[0].storage is tensors[1].storage
            if n == 2
            else len({t.storage for t in tensors}) < n
        ):  # rare: a tuple, where an input's dtype or an attribute's name is
            key += (sharing(t.storage for t in tensors),)
        return self.lookup(key, attrs)

    def lookup(self, key: Any, attrs: dict[str, Any]) -> tuple[Any, Any]:
        """:meth:`find` after the inputs' part of the key (``key``): the attributes' part added,
        the key's state. A framework bridge keys its buffers itself, as borrowed tensors of
        distinct storages at offset 0 (``interop``'s prepared call)."""
        if attrs:
            for name, value in attrs.items():
                kind = type(value)  # True and 1, 1 and 1.0 compare equal; not here
                if kind is float or kind is tuple:
                    kind = exact_kind(value)  # nor -0.0 and 0.0, inside tuples too
                key += (name, value, kind)
        runtime = key[4]
        opened = runtime._session_threads
        if (
            runtime.active_capture is not None  # a capture records the call (or is locked)
            or runtime.host.observes_sessions
            or (opened and thread_token() in opened)  # the full path refuses a nested session
        ):
            return key, BLOCKED
        hot = self.hot  # the last key replayed, compared before hashing one
        try:
            if key == hot[0]:
                return key, hot[1]
        except Exception:  # an attribute whose == raises: the lookup's rules decide
            pass
        try:
            plan = self.get(key)
        except TypeError:  # an unhashable attribute: never planned
            return key, UNHASHABLE
        if plan is not None and type(plan) is not Learning:
            self.hot = (key, plan)
        return key, plan

    def call_recorded(
        self,
        runtime: Runtime,
        tensors: tuple[Any, ...],
        key: Any,
        learning: Learning | None,
        call: Callable[[], Any],
        held: dict[int, Tensor] | None = None,
    ) -> Any:
        """``call()`` (the full path of the call keyed ``key``), with the backend's seam
        recording what the variant does; a clean recording whose replay repeats the previous
        one's signature plans ``key``. ``held``: :class:`OpRecording`'s (among ``tensors``)."""
        if learning is not None and learning.given_up:
            return call()
        if not runtime.replays_ops:  # nothing to record for: full path from now
            learning = self._learning(key, learning)
            learning.tries, learning.why = TRIES, f"backend {runtime.kind!r} has no op replay"
            return call()
        rec = OpRecording(tensors, held)
        before = runtime.counters.snapshot()
        previous = record_into(rec)
        try:
            result = call()
        finally:
            record_into(previous)
        learning = self._learning(key, learning)
        learning.tries += 1
        why = rec.why or _result_refusal(rec, result, runtime, before)
        replay = runtime.op_replay(rec) if why is None else None
        if replay is None:
            learning.why = why or f"backend {runtime.kind!r} cannot replay what this call launched"
            learning.signature = None
        elif replay.signature == learning.signature:
            self[key] = replay
        else:
            learning.signature = replay.signature
            learning.why = "its first recording (planned when the next one repeats it)"
        return result

    def defer(self, key: Any, why: str) -> None:
        """Keep ``key`` unrecorded this time (``why``): its next call is recorded, so a key
        that never comes again costs no recording."""
        self._learning(key, None).why = why

    def _learning(self, key: Any, learning: Learning | None) -> Learning:
        """``key``'s learning state, made (and kept, within :data:`MAX_PLANS`) if new."""
        if learning is None:
            learning = Learning()
            if len(self) >= MAX_PLANS:
                self.clear()
            self[key] = learning
        return learning

    def states(self) -> dict[str, str]:
        """Each call key's state, for the bench and ``ops``: "replay" or why the full path."""
        return {
            _described(key): f"full path: {plan.why}" if type(plan) is Learning else "replay"
            for key, plan in self.items()
        }


def _described(key: tuple[Any, ...]) -> str:
    """A call key as ``states()`` shows it: the runtime, each input's dtype, shape and layout
    (strides, offset where not compact), which inputs share a storage, the attributes."""
    parts, at = [], 0
    while at < len(key) and isinstance(key[at], DType):
        dt, shape, strides, offset, _ = key[at : at + 5]
        compact = is_compact(shape, strides) and not offset
        layout = "" if compact else f" strides {strides} offset {offset}"
        parts.append(f"{dt.name}{list(shape)}{layout}")
        at += 5
    if at < len(key) and type(key[at]) is tuple:
        parts.append(f"sharing {key[at]}")
        at += 1
    parts += [f"{key[i]}={key[i + 1]!r}" for i in range(at, len(key), 3)]
    return f"{key[4].name}({', '.join(parts)})"


def _result_refusal(
    rec: OpRecording, result: Any, runtime: Runtime, before: dict[str, int]
) -> str | None:
    """Why a recorded call cannot be replayed beyond what its seam saw, or None."""
    outputs = rec.outputs
    if not rec.launches:
        return "it launched nothing through the backend's seam"
    if len(outputs) == 1 and result is outputs[0]:
        pass
    elif (
        type(result) is not tuple
        or len(result) != len(outputs)
        or any(r is not o for r, o in zip(result, outputs, strict=True))
    ):
        return "it returned something other than the outputs it allocated, in order"
    if not rec.made:  # (a captured graph's held outputs count: the graph's replay writes them)
        return "it allocated no outputs (a replay allocates a call's outputs and launches)"
    for t in outputs:
        if not t.numel:
            return f"its output of shape {t.shape} is empty (a replay allocates no empty output)"
    after = runtime.counters.snapshot()
    moved = sorted(k for k, v in after.items() if before.get(k) != v)
    if moved:
        return f"it did counted work besides its launches ({', '.join(moved)})"
    return None


__all__ = ["BLOCKED", "MAX_PLANS", "TRIES", "UNHASHABLE", "Learning", "PlanTable"]

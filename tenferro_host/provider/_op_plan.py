"""Op plans: a call recorded once through the full path, then replayed at the cost of a guard.

What every road to a kernel shares (an op handle's call, a jit session's launch, a captured
graph): on a key not planned yet the call takes the full path — every check, every typed error
as it always was — while the backend's seams record what it did into this thread's
:class:`OpRecording` (``RECORDING.rec``): the outputs it allocated, its launches with each
argument as an input or output slot — ``(0, i)`` input ``i``, ``(1, j)`` output ``j`` — or a
constant. The backend turns a clean recording into an ``OpReplay`` (``Runtime.op_replay``),
which answers :data:`REPLAY_MISS` when its guard fails (the call then takes the full path,
which raises the typed error). The keys and their states live in a ``PlanTable``
(:mod:`._plan_table`); a key's plain values are told apart by :func:`exact_kind`, shared
storages by :func:`sharing`.

What a recording refuses (``why``): anything the seam cannot replay — a workspace, the stream, a
tensor that is neither an input nor an output, a synchronization, a counted transfer, outputs
other than the ones it returned. ``TENFERRO_OP_PLAN=0`` turns plans off.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, NamedTuple

from .._memo import MemoKind
from ..tensor import Tensor

if TYPE_CHECKING:
    from ._jit_session import JitLaunch

#: Whether op handles plan (``TENFERRO_OP_PLAN=0`` forces the full path on every call).
ENABLED: bool = os.environ.get("TENFERRO_OP_PLAN", "1") != "0"
#: A runtime's planned DSL launches by launch key (``runtime.launch_plans``, shared by its jit
#: sessions; :class:`~tenferro_host.provider.JitSession`).
LAUNCH_PLANS = MemoKind("provider.launch_plans", 1024, what="a runtime's planned DSL launches")
#: A replay's answer when its per-call guard fails: take the full path.
REPLAY_MISS: Any = object()
#: Where a recorded launch's tensor comes from in a call: ``(0, i)`` its input ``i``, ``(1, j)``
#: its output ``j`` (the one meaning of "slot" in a recording; a seam records anything else as
#: a constant of the launch).
Slot = tuple[int, int]


class _Recording(threading.local):
    """The op call (or DSL launch) being recorded on this thread: ``RECORDING.rec``, None when
    none is (a class default: a seam reads it as an attribute, with no call)."""

    rec: OpRecording | None = None


RECORDING = _Recording()


class OpRecording:
    """What one full-path call of an op did at the backend's seam (filled by the seam).

    ``launches`` holds the backend's own launch records; ``exclusive`` the indices of inputs
    borrowed for writing; ``why`` the first thing that cannot be replayed (None: replayable).
    ``held`` (a captured graph's intermediates): per output, in the order the call allocates
    them, a tensor of the inputs that stands for it — the seam hands it out instead of the fresh
    one (:meth:`output`), so the replay writes it as an input and allocates only the rest.
    """

    __slots__ = ("exclusive", "held", "inputs", "launches", "made", "outputs", "why")

    def __init__(self, inputs: tuple[Any, ...], held: dict[int, Tensor] | None = None) -> None:
        self.inputs = inputs
        self.held = held
        self.made = 0  # outputs the call allocated so far (held or not)
        self.outputs: list[Any] = []
        self.launches: list[Any] = []
        self.exclusive: set[int] = set()
        self.why: str | None = None

    def output(self, fresh: Tensor) -> Tensor:
        """What a seam's ``alloc_output`` hands the variant for ``fresh``, the output it just
        allocated: ``fresh``, recorded as the call's next output; or the held tensor of that
        position (one of :attr:`inputs`), where it has ``fresh``'s dtype and shape."""
        position = self.made
        self.made += 1
        held = self.held
        kept = None if held is None else held.get(position)
        if kept is not None:
            if kept.dtype == fresh.dtype and kept.shape == fresh.shape:
                return kept
            self.refuse(
                f"output {position} is {fresh.dtype.name}{list(fresh.shape)}, not the "
                f"{kept.dtype.name}{list(kept.shape)} it was when captured"
            )
        self.outputs.append(fresh)
        return fresh

    def refuse(self, why: str) -> None:
        """Mark the call as not replayable (the first reason is kept)."""
        if self.why is None:
            self.why = why

    def slot(self, t: Any, exclusive: bool) -> Slot | None:
        """(0, i) for input ``i``, (1, j) for output ``j`` — by identity — else None."""
        for i, x in enumerate(self.inputs):
            if x is t:
                if exclusive:
                    self.exclusive.add(i)
                return (0, i)
        for j, x in enumerate(self.outputs):
            if x is t:
                return (1, j)
        return None


class JitLaunchRecord(NamedTuple):
    """One DSL launch of a call being recorded, for any backend whose jit session's dispatch
    hands back a replayable form (CUDA's raw seam records its own launches).

    ``slots`` align with the launch's arguments: an array's :data:`Slot`, None for a scalar
    (its value is part of ``form``, fixed by the call's key). ``form`` is the backend's
    replayable form of the launch (``JitSession._dispatch``); neither holds the call's tensors.
    Two records are equal when their slots and forms are (a replay's signature).
    """

    slots: tuple[Slot | None, ...]
    form: Any

    @classmethod
    def record(cls, launch: JitLaunch, form: Any) -> None:
        """Add ``launch`` to the call being recorded on this thread, if any; a tensor that is
        neither an input nor an output of the call (e.g. a compact copy the variant made), or
        an empty one, refuses the recording."""
        rec = RECORDING.rec
        if rec is None:
            return
        written = launch.spec.ir.written
        slots: list[Slot | None] = []
        for p, v in zip(launch.spec.params, launch.args, strict=True):
            if type(v) is not Tensor:
                slots.append(None)
                continue
            slot = rec.slot(v, p.name in written)
            if slot is None or not v.numel:
                rec.refuse(f"DSL argument {p.name!r} is not a non-empty input or output tensor")
            slots.append(slot)
        rec.launches.append(cls(tuple(slots), form))


def exact_kind(value: Any) -> Any:
    """What tells a value from others that compare equal to it, for a plan key: a float's exact
    bits (``-0.0`` is not ``0.0``; every NaN is one key), a tuple's items' kinds, else the type
    (``True`` is not ``1``, ``1`` is not ``1.0``)."""
    kind = type(value)
    if kind is float:
        return value.hex()
    if kind is tuple:
        return tuple(exact_kind(v) for v in value)
    return kind


def sharing(storages: Any) -> tuple[int, ...]:
    """Which storages of a call are one: per storage, the index of its first occurrence (part
    of a key whenever two are: a replay binds each slot's own storage)."""
    storages = list(storages)
    return tuple(storages.index(s) for s in storages)


def record_into(rec: OpRecording | None) -> OpRecording | None:
    """Make ``rec`` this thread's recording; returns the one it replaces (restore it after)."""
    previous = RECORDING.rec
    RECORDING.rec = rec
    return previous


__all__ = ["RECORDING", "REPLAY_MISS", "JitLaunchRecord", "OpRecording"]

"""Op plans: an op call recorded once through the full path, then replayed at the cost of a guard.

A call of an op handle is keyed by (runtime, each input's dtype, shape, strides, offset and
runtime, each attribute's name, value and type). On a key not planned yet the call
takes the full path — every check, every typed error as it always was — while the backend's
seam records what the variant did into an :class:`OpRecording` (the outputs it allocated, its
launches with each argument as an input or output slot or a constant). The backend turns a clean
recording into a replay (``Runtime.op_replay``); the handle plans the key once two consecutive
recordings give the same replay signature (a variant that decides on something outside the key
never repeats its signature and stays on the full path). A replay is a guard, the outputs'
allocation, slot writes and one driver call per launch; when its guard fails (the thread has a
session of the runtime open, the runtime is closed or poisoned, debug waits, a session observer,
an exclusively borrowed input aliased by another) it answers :data:`REPLAY_MISS` and the call
takes the full path, which raises the typed error.

What a recording refuses (``why``): anything the seam cannot replay — a workspace, the stream, a
tensor that is neither an input nor an output, a synchronization, a counted
transfer, outputs other than the ones it returned. ``TENFERRO_OP_PLAN=0`` turns plans off.
"""

from __future__ import annotations

import os
import threading
from typing import Any

#: Whether op handles plan (``TENFERRO_OP_PLAN=0`` forces the full path on every call).
ENABLED: bool = os.environ.get("TENFERRO_OP_PLAN", "1") != "0"
#: A replay's answer when its per-call guard fails: take the full path.
REPLAY_MISS: Any = object()

#: ``RECORDING.rec``: the recording of the op call running on this thread (absent: none). A seam
#: reads it with ``getattr(RECORDING, "rec", None)`` (one C call, no call into this module).
RECORDING = threading.local()


class OpRecording:
    """What one full-path call of an op did at the backend's seam (filled by the seam).

    ``launches`` holds the backend's own launch records; ``exclusive`` the indices of inputs
    borrowed for writing; ``why`` the first thing that cannot be replayed (None: replayable).
    """

    __slots__ = ("exclusive", "inputs", "launches", "outputs", "why")

    def __init__(self, inputs: tuple[Any, ...]) -> None:
        self.inputs = inputs
        self.outputs: list[Any] = []
        self.launches: list[Any] = []
        self.exclusive: set[int] = set()
        self.why: str | None = None

    def refuse(self, why: str) -> None:
        """Mark the call as not replayable (the first reason is kept)."""
        if self.why is None:
            self.why = why

    def slot(self, t: Any, exclusive: bool) -> tuple[int, int] | None:
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


def recording() -> OpRecording | None:
    """The recording of the op call running on this thread, if one is being recorded."""
    rec: OpRecording | None = getattr(RECORDING, "rec", None)
    return rec


def record_into(rec: OpRecording | None) -> OpRecording | None:
    """Make ``rec`` this thread's recording; returns the one it replaces (restore it after)."""
    previous = getattr(RECORDING, "rec", None)
    RECORDING.rec = rec
    return previous


__all__ = ["ENABLED", "RECORDING", "REPLAY_MISS", "OpRecording", "record_into", "recording"]

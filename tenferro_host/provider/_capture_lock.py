"""What a capture's lock on its runtime refuses, said as a typed error.

While ``ex.capture()`` is open its runtime belongs to it: a session from another thread is
refused (:func:`locked`), and so is anything a captured graph could not hold
(:func:`refuse_in_capture`: a download, a synchronization, a module load, ...); what only a
device graph cannot hold is refused in the native form alone (:func:`refuse_in_device_graph`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CaptureError

if TYPE_CHECKING:
    from ._runtime import Runtime


def locked(runtime: Runtime, op: str | None = None) -> CaptureError:
    """The refusal of a session (or op call) of a runtime another thread is capturing."""
    return CaptureError(
        f"runtime {runtime.name!r} is locked by a capture on another thread",
        op=op,
        fix="wait until that capture ends, or use another runtime (host.new_backend)",
    )


def refuse_in_capture(runtime: Runtime, what: str, fix: str, op: str | None = None) -> None:
    """Raise CaptureError when ``runtime`` is being captured (``what`` would break it); the
    capture then makes no graph (``Capture.refuse``)."""
    capture = runtime.active_capture
    if capture is not None:
        raise capture.refuse(what, fix, op)


def refuse_in_device_graph(runtime: Runtime, what: str, fix: str, op: str | None = None) -> None:
    """Raise CaptureError when ``runtime`` is being captured into a device graph (the native
    form: ``what`` cannot be recorded there, though the replayed form runs it as called)."""
    capture = runtime.active_capture
    if capture is not None and capture.device_graph:
        raise capture.refuse(f"{what} in a native device graph", fix, op)


__all__ = ["refuse_in_capture", "refuse_in_device_graph"]

"""The op replay every backend specializes: what a recorded op call's replay is on any device.

``Runtime.op_replay`` turns a clean :class:`~._op_plan.OpRecording` into a subclass of
:class:`OpReplay`. What is the same on every backend lives here: the outputs' layouts and their
allocation per call (``runtime.empty`` without its checks), the inputs the call writes (a
read-only borrow there answers ``REPLAY_MISS``: the full path raises the typed error), the
signature two recordings are compared by, and the bench's steps. A backend adds its launches and
writes ``__call__`` — its guard, :meth:`OpReplay.allocate`, its launches, the result — in one
frame, so that a planned call enters each file once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..tensor import Tensor

if TYPE_CHECKING:
    from ._op_plan import OpRecording
    from ._runtime import Runtime

#: One output of a call: its bytes and Tensor's arguments after the storage.
Output = tuple[int, tuple[Any, tuple[int, ...], tuple[int, ...], int, bool]]


class OpReplay:
    """A recorded op call (or a jit session's launch), replayed: called with the call's inputs
    it returns the call's result (one tensor, or a tuple of several or none), or
    ``REPLAY_MISS`` when its guard fails."""

    __slots__ = ("_allocators", "core", "exclusive", "outputs", "runtime", "several", "signature")

    def __init__(self, runtime: Runtime, rec: OpRecording, launches: Any) -> None:
        """``launches``: what of the backend's launches two recordings must repeat to plan."""
        self.runtime = runtime
        #: the compiled call's core of this replay (``_compiled``), None where there is none
        self.core: Any = None
        self.outputs: tuple[Output, ...] = tuple(
            (t.storage.nbytes, (t.dtype, t.shape, t.strides, 0, True)) for t in rec.outputs
        )
        #: per output: its storage's allocation (the runtime's, bound to its size) and layout
        self._allocators = tuple(
            (runtime.output_allocator(nbytes, layout[0]), layout) for nbytes, layout in self.outputs
        )
        #: whether a call returns a tuple (several outputs, or none: a jit session's launch)
        self.several = len(self.outputs) != 1
        #: the inputs the call writes: each checked writable per call
        self.exclusive = tuple(sorted(rec.exclusive))
        self.signature = (
            tuple((layout[:3], nbytes) for nbytes, layout in self.outputs),
            self.exclusive,
            launches,
        )

    def __call__(self, tensors: tuple[Any, ...]) -> Any:
        raise NotImplementedError

    def launch_buffers(self, inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> bool:
        """The replay's launches on a framework's buffers, without host tensors, as the backend
        reaches memory: device addresses on CUDA, numpy arrays in the tensors' layouts on the
        CPU. ``inputs`` are the call's (read, never written: a replay that writes an input has
        ``exclusive``), ``outputs`` allocated by the caller in the layouts of :attr:`outputs`.
        True when launched; False when the guard refuses or the backend launches no such
        buffers (the caller takes the call's own path). The caller orders any streams."""
        return False

    def allocate(self) -> list[Tensor]:
        """The call's outputs, fresh from the runtime's allocator, or from a framework's while
        one is the runtime's (an instance's ``_allocate``: ``interop``'s output allocator)."""
        runtime = self.runtime
        if "_allocate" in runtime.__dict__:
            seam = runtime._allocate
            return [Tensor(seam(nbytes, layout[0]), *layout) for nbytes, layout in self.outputs]
        if self.several:
            return [Tensor(allocate(), *layout) for allocate, layout in self._allocators]
        allocate, layout = self._allocators[0]
        return [Tensor(allocate(), *layout)]

    def steps(self, tensors: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
        """Each step of a replay of ``tensors`` on its own, for the bench (a backend adds its
        own steps)."""
        return {"replay": lambda: self(tensors), "allocation": lambda: self.allocate()[0]}


__all__ = ["OpReplay"]

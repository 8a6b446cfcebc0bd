"""What a capture records: each op call with its tensors as references (a borrowed tensor, a
call's output, a view of one made anew each replay), the declared scalars, and the slots a
graph's inputs fill; read by :mod:`._capture` while recording and :mod:`._captured_graph` to
replay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from ..tensor import Tensor

if TYPE_CHECKING:
    from ._exec_session import ExecSession


@dataclass(frozen=True)
class Slot:
    """What a replay's tensor must be for one input of a graph."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    runtime: str
    domain: Any  # the allocation domain (AllocationDomainId)

    @classmethod
    def of(cls, t: Tensor) -> Slot:
        """The slot ``t`` fills."""
        rt = t.storage.runtime
        return cls(t.dtype.name, t.shape, t.strides, rt.name, rt.domain)


class Scalar:
    """A declared scalar attribute of a capture (``cap.scalar(name, value)``): pass it as an
    attribute inside the capture; each replay may give it a new value by keyword."""

    __slots__ = ("name", "type", "value")

    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value, self.type = name, value, type(value)

    def __repr__(self) -> str:
        return f"<capture scalar {self.name}={self.value!r}>"


class OpCall(Protocol):
    """What a capture needs of an op handle (the host's ``OpHandle``; the SPI does not import
    the host): its name, calling it (its plan where it has one) and running it inside an open
    exec session."""

    name: str

    def __call__(self, *tensors: Any, **attrs: Any) -> Any:
        """Run the op on its tensors' runtime, planned where the call's key is."""

    def run_in(self, ex: ExecSession, tensors: Any, attrs: dict[str, Any]) -> Any:
        """Run the op in ``ex``, checked as ``ex.run`` checks it."""


class NativeCapture(Protocol):
    """What a backend's device graph offers a capture (``runtime.native_capture()``): begin
    and end the recording, then the replay of the graph for its slots and outputs."""

    def begin(self) -> None:
        """Start recording the runtime's work into a graph."""

    def end(self, failed: bool) -> None:
        """Stop; ``failed``: drop what was recorded, else make the graph runnable."""

    def probe(self, scalars: dict[str, Any], rerun: Callable[[dict[str, Any]], None]) -> None:
        """Find where the declared ``scalars`` reach the graph: ``rerun(values)`` makes the
        capture's calls again (on its thread, in its session) with other scalar values."""

    def launcher(
        self,
        slots: list[Tensor],
        constants: list[Tensor],
        outputs: list[Tensor],
        ops: tuple[str, ...],
        scalars: dict[str, Any],
    ) -> Any:
        """A callable from the slots' tensors (checked) and the scalars' values (``scalars``, the
        declared ones, passed as is when a replay gives none) to fresh outputs, or (a str) why
        not; it checks its runtime's state itself (a replay opens no session it does not need).
        Its ``core`` attribute, where it has one, is the replay compiled: ``core(tensors)``
        checks the tensors as the graph does and gives the outputs, or FALLBACK for this
        callable."""


class RecordedCall:
    """One recorded op call: its handle, each tensor as a reference, its attributes, how many
    outputs it made (``single``: one, returned bare) and each one's dtype and shape where it is
    a compact tensor (a graph may hold one for it); ``take`` (set by the graph) picks its
    tensors from a replay's tensors in order (the borrowed ones, then each call's outputs)."""

    __slots__ = ("args", "attrs", "handle", "layouts", "nout", "scalars", "single", "take")

    def __init__(
        self,
        handle: OpCall,
        args: tuple[tuple[int, int, int], ...],
        attrs: dict[str, Any],
        scalars: dict[str, str],
        outputs: tuple[Tensor, ...],
        single: bool,
    ) -> None:
        self.handle, self.args, self.attrs = handle, args, attrs
        self.scalars, self.single = scalars, single  # attribute -> declared scalar name
        self.nout = len(outputs)
        self.layouts = tuple(
            (t.dtype, t.shape) if type(t) is Tensor and t.is_compact() and not t.offset else None
            for t in outputs
        )
        self.take: Callable[[Sequence[Tensor]], tuple[Tensor, ...]] = nothing

    def with_scalars(self, values: dict[str, Any]) -> dict[str, Any]:
        """The call's attributes with each declared scalar's value from ``values``."""
        if not self.scalars:
            return self.attrs
        return {**self.attrs, **{attr: values[name] for attr, name in self.scalars.items()}}


def nothing(tensors: Sequence[Tensor]) -> tuple[Tensor, ...]:
    return ()


class View:
    """A view of a tensor the graph makes anew each replay (an earlier node's output, or an
    input): the same dtype, shape and strides, ``delta`` elements from that tensor's offset."""

    __slots__ = ("delta", "dtype", "shape", "source", "strides")

    def __init__(self, source: int, view: Tensor, of: Tensor) -> None:
        self.source = source  # the position of the tensor it views among a replay's tensors
        self.dtype, self.shape, self.strides = view.dtype, view.shape, view.strides
        self.delta = view.offset - of.offset

    def __call__(self, tensors: Sequence[Tensor]) -> Tensor:
        of = tensors[self.source]
        return Tensor(of.storage, self.dtype, self.shape, self.strides, of.offset + self.delta)


def within(view: Tensor, of: Tensor) -> bool:
    """Whether ``view`` is in ``of``'s memory and elements (a view a replay can make of it)."""
    if view.storage is not of.storage:
        return False
    (lo, hi), (lo_of, hi_of) = view.span(), of.span()
    return lo_of <= lo and hi <= hi_of


def taker(picks: Sequence[int | View]) -> Callable[[Sequence[Tensor]], tuple[Tensor, ...]]:
    """``tensors -> tuple(tensors[p] for p in picks)``, one C call where there are two or more;
    a :class:`View` among the picks is made of the tensor it views."""
    if not picks:
        return nothing
    if any(type(p) is View for p in picks):
        made = [p if type(p) is View else itemgetter(p) for p in picks]
        return lambda tensors: tuple(pick(tensors) for pick in made)
    if len(picks) == 1:
        one = itemgetter(picks[0])
        return lambda tensors: (one(tensors),)
    taken: Callable[[Sequence[Tensor]], tuple[Tensor, ...]] = itemgetter(*picks)
    return taken


#: What ``Capture._output_of`` answers for a tensor in an output's memory outside its elements.
OUTSIDE: Any = ((-1, -1, -1), None)
#: A tensor reference: (0, j, 0) the capture's j-th borrowed tensor; (1, k, i) output i of call
#: k; (2, v, 0) its v-th view of an earlier call's output (made anew each replay).
Ref = tuple[int, int, int]

__all__ = ["Slot"]

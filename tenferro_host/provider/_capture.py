"""Capture: a session's op calls recorded once, replayed with new tensors of the same slots.

``with ex.capture() as cap:`` records every op call made in the exec session ``ex`` (``ex.run``,
and ``host.run`` of a tensor of the runtime, which is routed into it); ``cap.graph(inputs=...,
outputs=...)`` turns the record into a :class:`CapturedGraph` whose signature — one
:class:`Slot` per input: dtype, shape, strides, allocation domain, runtime — comes from the
tensors the capture borrowed. ``graph.replay(*tensors, **scalars)`` checks each tensor against
its slot and runs the graph. The replayed form (CPU and WebGPU: ``caps`` says
``capture: replayed``) is keyed and planned as one op call (:mod:`._plan_table`): its first
replays run every node in one session while the backend's seams record them, and once two
recordings agree a replay is one backend replay of all its launches; a graph its backend cannot
replay runs its nodes one by one through their op handles, as the calls eager. A backend whose
``native_capture()`` gives a :class:`NativeCapture` (CUDA: ``capture: native``) records the
block into a device graph as well, and the graph replays it whole where it can follow it
(``graph.form``, ``graph.why_replayed``; docs/capture.md).

While a capture is open its runtime is locked to it: a session of the runtime from another
thread is refused, and so is everything a native graph could not hold — a synchronization, a
download, a DLPack export, a full retirement queue's wait, a DSL specialization or module load
not warmed up before, a launch outside an op call. Each refusal is a :class:`CaptureError`
saying what to do instead; the capture then ends without a graph and drops what it held.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from threading import get_ident as _get_ident
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import (
    AliasingError,
    CaptureError,
    ForeignRuntimeError,
    TenferroError,
    ValidationError,
)
from ..tensor import Tensor
from ._capture_lock import locked
from ._compiled import CALL, Unplanned
from ._op_plan import ENABLED, REPLAY_MISS
from ._plan_table import BLOCKED, Learning, PlanTable
from ._session import Session

if TYPE_CHECKING:
    from ._exec_session import ExecSession
    from ._runtime import Runtime

#: Captures opened in this process (the bench shows that replays open none).
_opened = itertools.count()
_opened_count = 0


def captures_opened() -> int:
    """How many captures this process has opened (a replay opens none)."""
    return _opened_count


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
        not; it checks its runtime's state itself (a replay opens no session it does not need)."""


class _Call:
    """One recorded op call: its handle, each tensor as a reference, its attributes, how many
    outputs it made (``single``: one, returned bare); ``take`` (set by the graph) picks its
    tensors from a replay's tensors in order (the borrowed ones, then each call's outputs)."""

    __slots__ = ("args", "attrs", "handle", "nout", "scalars", "single", "take")

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
        self.take: Callable[[list[Tensor]], tuple[Tensor, ...]] = _nothing

    def with_scalars(self, values: dict[str, Any]) -> dict[str, Any]:
        """The call's attributes with each declared scalar's value from ``values``."""
        if not self.scalars:
            return self.attrs
        return {**self.attrs, **{attr: values[name] for attr, name in self.scalars.items()}}


def _nothing(tensors: list[Tensor]) -> tuple[Tensor, ...]:
    return ()


class _View:
    """A view of a tensor the graph makes anew each replay (an earlier node's output, or an
    input): the same dtype, shape and strides, ``delta`` elements from that tensor's offset."""

    __slots__ = ("delta", "dtype", "shape", "source", "strides")

    def __init__(self, source: int, view: Tensor, of: Tensor) -> None:
        self.source = source  # the position of the tensor it views among a replay's tensors
        self.dtype, self.shape, self.strides = view.dtype, view.shape, view.strides
        self.delta = view.offset - of.offset

    def __call__(self, tensors: list[Tensor]) -> Tensor:
        of = tensors[self.source]
        return Tensor(of.storage, self.dtype, self.shape, self.strides, of.offset + self.delta)


def _within(view: Tensor, of: Tensor) -> bool:
    """Whether ``view`` is in ``of``'s memory and elements (a view a replay can make of it)."""
    if view.storage is not of.storage:
        return False
    (lo, hi), (lo_of, hi_of) = view.span(), of.span()
    return lo_of <= lo and hi <= hi_of


def _taker(picks: list[int | _View]) -> Callable[[list[Tensor]], tuple[Tensor, ...]]:
    """``tensors -> tuple(tensors[p] for p in picks)``, one C call where there are two or more;
    a :class:`_View` among the picks is made of the tensor it views."""
    if not picks:
        return _nothing
    if any(type(p) is _View for p in picks):
        made = [p if type(p) is _View else itemgetter(p) for p in picks]
        return lambda tensors: tuple(pick(tensors) for pick in made)
    if len(picks) == 1:
        one = itemgetter(picks[0])
        return lambda tensors: (one(tensors),)
    taken: Callable[[list[Tensor]], tuple[Tensor, ...]] = itemgetter(*picks)
    return taken


#: What ``Capture._output_of`` answers for a tensor in an output's memory outside its elements.
_OUTSIDE: Any = ((-1, -1, -1), None)
#: A tensor reference: (0, j, 0) the capture's j-th borrowed tensor; (1, k, i) output i of call
#: k; (2, v, 0) its v-th view of an earlier call's output (made anew each replay).
_Ref = tuple[int, int, int]


class Capture(Session):
    """``ex.capture()``: records the op calls of ``ex`` until the block ends (a sub-session)."""

    kind_name = "capture"

    def __init__(self, ex: ExecSession) -> None:
        super().__init__(ex.runtime, parent=ex)
        self._ex = ex
        self._calls: list[_Call] = []
        self._borrowed: list[Tensor] = []  # tensors from outside the capture, leased to it
        self._refs: dict[int, _Ref] = {}  # id(tensor) -> its reference
        self._made: list[tuple[Tensor, ...]] = []  # each call's outputs (keeps their ids valid)
        #: each view of a call's output: the output's reference, the view, the output
        self._views: list[tuple[_Ref, Tensor, Tensor]] = []
        self._made_in: dict[int, list[tuple[_Ref, Tensor]]] = {}  # id(storage) -> its outputs
        self._scalars: dict[str, Scalar] = {}
        self._depth = 0  # > 0 while a recorded call runs (its own ex.run calls are its part)
        #: why the capture makes no graph ("KeyError: ..."); a string: an exception's traceback
        #: would keep the frames of the block (and the tensors they hold) alive with the capture
        self._failed: str | None = None
        self._native: NativeCapture | None = None
        self._probing = False  # while the native graph's probes make the calls again

    # -- session hooks -----------------------------------------------------------------------------
    def _on_enter(self) -> None:
        global _opened_count
        runtime = self.runtime
        open_ = runtime.active_capture
        if open_ is not None:
            raise open_.refuse(
                "a second ex.capture() (the runtime is already being captured)",
                "end the open capture first; captures do not nest",
            )
        if runtime.retirement.refuse_wait is not None:  # another framework captures its work
            raise CaptureError(
                f"runtime {runtime.name!r} is already being captured",
                fix="end that capture first; captures do not nest",
            )
        why = runtime.capture_refusal()
        if why is not None:
            raise CaptureError(f"runtime {runtime.name!r} cannot be captured now: {why}")
        native = runtime.native_capture()
        if native is not None:
            native.begin()
        self._native = native
        runtime.active_capture = self
        runtime.retirement.refuse_wait = self._refuse_wait
        _opened_count = next(_opened) + 1

    def _on_exit(self, error: BaseException | None) -> None:
        runtime = self.runtime
        try:
            if self._native is not None:
                failed = error is not None or self._failed is not None
                self._native.end(failed)
                if self._scalars and not failed:
                    self._native.probe({k: s.value for k, s in self._scalars.items()}, self._rerun)
        except BaseException as exc:  # the graph could not be made: the capture failed
            error = exc
            raise
        finally:
            runtime.active_capture = None
            runtime.retirement.refuse_wait = None
            if error is not None:
                self._failed = _why(error)
            if self._failed is not None:  # no partial graph: drop everything the capture held
                self._calls, self._borrowed, self._made, self._views = [], [], [], []
                self._refs.clear()
                self._made_in.clear()
                self._native = None

    def refuse(self, what: str, fix: str, op: str | None = None) -> CaptureError:
        """The refusal of ``what`` inside this capture (raise it). Made on the capturing thread,
        it ends the capture without a graph even if the block catches the error."""
        exc = CaptureError(f"{what} inside a capture of {self.runtime.name!r}", op=op, fix=fix)
        if self._failed is None and self._owner == _get_ident() and not self._probing:
            self._failed = _why(exc)  # not another thread's refusal, nor a probe's
        return exc

    def _refuse_wait(self, what: str) -> None:
        raise self.refuse(
            f"{what} would block the host",
            "release what the capture holds before it, or capture fewer ops",
        )

    # -- recording ---------------------------------------------------------------------------------
    def scalar(self, name: str, value: Any) -> Scalar:
        """Declare a scalar attribute ``name`` (its value for the capture); replays set it."""
        self._check()
        if not isinstance(value, (bool, int, float)):
            raise ValidationError(
                f"capture scalar {name!r} must be a bool, int or float, got {type(value).__name__}",
                argument=name,
            )
        if name in self._scalars:
            raise ValidationError(f"capture scalar {name!r} is already declared", argument=name)
        s = self._scalars[name] = Scalar(name, value)
        return s

    def run(
        self, ex: ExecSession, name: str, tensors: tuple[Any, ...], attrs: dict[str, Any]
    ) -> Any:
        """Run op ``name`` in ``ex`` and record it (a call made by a recorded call is its part)."""
        host = self.runtime.host
        if self._depth:
            return host.run_in_session(ex, name, tensors, attrs)
        self._check()
        handle = host.op(name)  # type: ignore[attr-defined]
        scalars = {k: v.name for k, v in attrs.items() if type(v) is Scalar}
        values = {k: (v.value if type(v) is Scalar else v) for k, v in attrs.items()}
        args = tuple(self._ref(t) for t in tensors)
        self._depth += 1
        try:
            result = handle.run_in(ex, tensors, values)
        except BaseException as exc:  # a half-recorded call: the capture makes no graph
            self._failed = _why(exc)
            raise
        finally:
            self._depth -= 1
        single = type(result) is Tensor or not isinstance(result, (tuple, list))
        outputs = (result,) if single else tuple(result)
        k = len(self._calls)
        for i, out in enumerate(outputs):
            self._refs[id(out)] = ref = (1, k, i)
            if type(out) is Tensor:
                self._made_in.setdefault(id(out.storage), []).append((ref, out))
        self._made.append(outputs)
        self._calls.append(_Call(handle, args, values, scalars, outputs, single))
        return result

    def _rerun(self, scalar_values: dict[str, Any]) -> None:
        """Make the recorded calls again in the capture's exec session with these scalar values
        (a native probe: captured, never launched); refusals then end nothing."""
        made: list[tuple[Tensor, ...]] = []
        self._depth += 1  # a call a variant makes is part of its call, as when recorded
        self._probing = True
        try:
            for call in self._calls:
                args = tuple(self._tensor(ref, made) for ref in call.args)
                result = call.handle.run_in(self._ex, args, call.with_scalars(scalar_values))
                made.append((result,) if call.single else tuple(result))
        finally:
            self._depth -= 1
            self._probing = False

    def _tensor(self, ref: _Ref, made: list[tuple[Tensor, ...]]) -> Any:
        """The tensor ``ref`` stands for when the calls are made again (``made``: their new
        outputs)."""
        kind, j, i = ref
        if kind == 0:
            return self._borrowed[j]
        if kind == 1:
            return made[j][i]
        (_, k, i), view, of = self._views[j]
        return _View(0, view, of)([made[k][i]])

    @property
    def device_graph(self) -> bool:
        """Whether the backend records this capture into a device graph (``native_capture``)."""
        return self._native is not None

    @property
    def in_op_call(self) -> bool:
        """Whether a recorded op call is running (what it does is part of its node)."""
        return self._depth > 0

    def require_op_call(self, what: str, op: str | None) -> None:
        """Refuse ``what`` made directly in the capture (outside a recorded op call)."""
        if not self._depth:
            raise self.refuse(
                f"{what} opened directly (it cannot be replayed)",
                "launch it from an op's variant and call the op with ex.run inside the capture",
                op,
            )

    def routed(self, handle: OpCall, tensors: tuple[Any, ...], attrs: dict[str, Any]) -> Any:
        """``host.run`` of a tensor of the captured runtime: recorded here, on this thread only."""
        if self._owner != _get_ident():
            raise locked(self.runtime, handle.name)
        return self.run(self._ex, handle.name, tensors, attrs)

    def _ref(self, t: Any) -> _Ref:
        ref = self._refs.get(id(t))
        if ref is None:
            of = self._output_of(t) if type(t) is Tensor else None
            if of is None:  # borrowed from outside (anything else the op's own checks refuse)
                ref = (0, len(self._borrowed), 0)
                self._borrowed.append(t)
            elif of is _OUTSIDE:
                raise self.refuse(
                    "a tensor in the memory of a captured call's output but outside its elements",
                    "pass the output, or a view of it (slicing, permute), to the later call",
                )
            else:
                ref = self._view(t, of)
            self._refs[id(t)] = ref
        return ref

    def _output_of(self, t: Tensor) -> tuple[_Ref, Tensor] | None:
        """The call output whose elements ``t`` views, and its reference; None for a tensor from
        outside; :data:`_OUTSIDE` for one in an output's memory but outside its elements."""
        made = self._made_in.get(id(t.storage))
        if made is None:
            return None
        for ref, out in made:
            if _within(t, out):
                return ref, out
        return _OUTSIDE

    def _view(self, t: Tensor, of: tuple[_Ref, Tensor]) -> _Ref:
        """``t``'s reference as a view of call output ``of``: each replay views its output."""
        self._refs[id(t)] = ref = (2, len(self._views), 0)
        self._views.append((of[0], t, of[1]))
        return ref

    # -- the graph ---------------------------------------------------------------------------------
    def graph(self, inputs: Any = (), outputs: Any = ()) -> CapturedGraph:
        """The replayable graph: ``inputs`` become its slots (every other tensor the capture
        borrowed is leased to the graph as a constant), ``outputs`` what a replay returns."""
        if not self.closed:
            raise CaptureError("the capture is still open", fix="call cap.graph() after its block")
        if self._failed is not None:
            raise CaptureError(
                f"the capture ended with {self._failed}; it made no graph",
                fix="fix the error and capture again",
            )
        slots: list[int] = []
        for n, t in enumerate(inputs):
            ref = self._refs.get(id(t))
            if ref is None or ref[0] != 0:
                raise ValidationError(
                    f"inputs[{n}] is not a tensor the capture's op calls borrowed from outside "
                    "it; pass the tensors the captured ops read or wrote",
                    argument="inputs",
                )
            if ref[1] in slots:  # one slot each: a replay binds each slot's own tensor
                raise ValidationError(
                    f"inputs[{n}] is the tensor inputs[{slots.index(ref[1])}] already names; "
                    "name each borrowed tensor once (a replay passes one tensor per slot)",
                    argument="inputs",
                )
            slots.append(ref[1])
        refs: list[_Ref] = []
        for n, t in enumerate(outputs):
            ref = self._refs.get(id(t))
            if ref is None and type(t) is Tensor:  # a view made after the call that made it
                of = self._output_of(t)
                ref = None if of is None or of is _OUTSIDE else self._view(t, of)
            if ref is None or ref[0] == 0:
                raise ValidationError(
                    f"outputs[{n}] is not a tensor a captured op call returned (or a view of one)",
                    argument="outputs",
                )
            refs.append(ref)
        graph = CapturedGraph(
            self.runtime,
            self._calls,
            self._borrowed,
            slots,
            refs,
            dict(self._scalars),
            list(self._views),
        )
        native, self._native = self._native, None
        if native is not None:  # the device graph goes to this graph (the first one made)
            found = native.launcher(
                [self._borrowed[j] for j in slots],
                [self._borrowed[j] for j in graph._constants],
                [self._made[k][i] if kind == 1 else self._views[k][1] for kind, k, i in refs],
                graph.ops,
                graph.scalars,
            )
            if isinstance(found, str):
                graph.why_replayed = found
            else:
                graph._launcher, graph.form = found, "native"
        return graph


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _overlap(a: Tensor, b: Tensor) -> bool:
    if a.storage is not b.storage or not a.numel or not b.numel:
        return False
    (lo_a, hi_a), (lo_b, hi_b) = a.span(), b.span()
    return lo_a < hi_b and lo_b < hi_a


class CapturedGraph:
    """A captured op sequence: ``replay(*tensors, **scalars)`` runs it on new tensors.

    ``slots`` is the typed signature; the tensors the capture borrowed besides the inputs are
    held (leased) until :meth:`close`. Aliasing among a replay's tensors (and the graph's
    constants) must be what it was at capture: two slots that did not overlap then must not
    overlap now, and the other way round.
    """

    #: "native": a device graph launched whole; "replayed": the recorded calls one by one.
    form = "replayed"
    #: Why a backend with a native form replays this graph instead (None: it does not).
    why_replayed: str | None = None
    _launcher: Any = None

    def __init__(
        self,
        runtime: Runtime,
        calls: list[_Call],
        borrowed: list[Tensor],
        slots: list[int],
        outputs: list[_Ref],
        scalars: dict[str, Scalar],
        views: list[tuple[_Ref, Tensor, Tensor]],
    ) -> None:
        self.runtime = runtime
        self._calls: list[_Call] | None = calls
        self._borrowed = borrowed
        self._slots = slots
        self.slots = tuple(Slot.of(borrowed[j]) for j in slots)
        #: what each slot's tensor must be, compared as one tuple (the runtime apart)
        self._fits = [(t.dtype, t.shape, t.strides) for t in (borrowed[j] for j in slots)]
        #: each borrowed tensor that views an input's elements, made anew of a replay's input
        self._derived: list[tuple[int, _View]] = []
        #: the borrowed tensors leased to the graph as they are (neither an input nor its view)
        self._constants: list[int] = []
        for j, t in enumerate(borrowed):
            if j in slots:
                continue
            of = next((s for s in slots if _within(t, borrowed[s])), None)
            if of is None:
                self._constants.append(j)
            else:
                self._derived.append((j, _View(of, t, borrowed[of])))
        #: where each call's outputs start among a replay's tensors (after the borrowed ones)
        starts, at = [], len(borrowed)
        for call in calls:
            starts.append(at)
            at += call.nout

        def pick(ref: _Ref) -> int | _View:
            kind, j, i = ref
            if kind == 2:  # a view of an earlier call's output
                (_, k, i), view, of = views[j]
                return _View(starts[k] + i, view, of)
            return j if kind == 0 else starts[j] + i

        for call in calls:
            call.take = _taker([pick(ref) for ref in call.args])
        self._returned = _taker([pick(ref) for ref in outputs])
        self.scalars = {name: s.value for name, s in scalars.items()}
        self._scalar_types = {name: s.type for name, s in scalars.items()}
        self._overlaps = self._overlap_pattern(borrowed)
        #: The graph's own op plans (its key: the borrowed tensors' layouts and the scalars).
        self._plans = PlanTable()
        #: Replays so far; a replay never captures again.
        self.replays = 0

    def plans(self) -> dict[str, str]:
        """The graph's plan states, as :meth:`OpHandle.plans` says an op's: "replay" or why the
        recorded calls run one by one through their full path."""
        return self._plans.states()

    @property
    def ops(self) -> tuple[str, ...]:
        """The op of each node, in order."""
        return tuple(c.handle.name for c in self._calls or ())

    def close(self) -> None:
        """Destroy the graph: its leases (constants, ops) are let go; replays are refused."""
        self._calls = None
        self._borrowed = []
        if self._launcher is not None:
            self._launcher.close()
            self._launcher = None

    def _overlap_pattern(self, tensors: list[Tensor]) -> frozenset[tuple[int, int]]:
        return frozenset(
            (i, j)
            for i, j in itertools.combinations(range(len(tensors)), 2)
            if _overlap(tensors[i], tensors[j])
        )

    def _bind(
        self, tensors: tuple[Any, ...], scalars: dict[str, Any]
    ) -> tuple[list[Tensor], dict[str, Any]]:
        """The replay's tensor per borrowed reference, and its scalar values; or a typed error."""
        runtime = self.runtime
        if len(tensors) != len(self.slots):
            raise ValidationError(
                f"this graph takes {len(self.slots)} tensors (its slots), got {len(tensors)}",
                argument="tensors",
            )
        values = list(self._borrowed)
        for n, (t, fits, j) in enumerate(zip(tensors, self._fits, self._slots, strict=True)):
            if (
                type(t) is not Tensor
                or t.storage.runtime is not runtime
                or (t.dtype, t.shape, t.strides) != fits
            ):
                self._misfit(n, t)
            values[j] = t
        for j, view in self._derived:
            values[j] = view(values)
        if not self._overlaps and len({id(t.storage) for t in values}) == len(values):
            pattern = self._overlaps  # no two share a storage: none overlaps, as at capture
        else:
            pattern = self._overlap_pattern(values)
        if pattern != self._overlaps:
            i, j = sorted(pattern ^ self._overlaps)[0]
            now = "overlap" if (i, j) in pattern else "do not overlap"
            raise AliasingError(
                f"the replay's tensors {self._name(i)} and {self._name(j)} {now} in memory, "
                "unlike at capture; a graph repeats the aliasing it was captured with",
                argument="tensors",
            )
        if not scalars:
            return values, self.scalars
        unknown = sorted(set(scalars) - set(self.scalars))
        if unknown:
            raise ValidationError(
                f"this graph has no scalars {unknown}; it declares "
                f"{sorted(self.scalars) or 'none'}",
                argument=unknown[0],
            )
        values_of = dict(self.scalars)
        for name, value in scalars.items():
            want = self._scalar_types[name]
            if type(value) is not want and not (want is float and type(value) is int):
                raise ValidationError(
                    f"scalar {name!r} was declared {want.__name__}, got {type(value).__name__}",
                    argument=name,
                )
            values_of[name] = want(value)
        return values, values_of

    def _misfit(self, n: int, t: Any) -> None:
        """Raise the typed error of replay tensor ``n``, which does not fit its slot."""
        slot, runtime = self.slots[n], self.runtime
        if type(t) is not Tensor:
            raise ValidationError(
                f"tensor {n} is a {type(t).__name__}, not a Tensor; the slot is {slot}",
                argument=f"tensors[{n}]",
            )
        rt = t.storage.runtime
        if rt is not runtime:
            raise ForeignRuntimeError(
                f"tensor {n} lives on {rt.name!r} (its own allocation domain); the graph "
                f"was captured on {runtime.name!r}: move it there first"
            )
        got = Slot.of(t)
        wrong = [f for f in ("dtype", "shape", "strides") if getattr(got, f) != getattr(slot, f)]
        raise ValidationError(
            f"tensor {n} has {', '.join(f'{f} {getattr(got, f)}' for f in wrong)}; its "
            f"slot has {', '.join(f'{f} {getattr(slot, f)}' for f in wrong)} (a different "
            "layout is another graph: capture it)",
            argument=f"tensors[{n}]",
        )

    def _name(self, j: int) -> str:
        return f"tensors[{self._slots.index(j)}]" if j in self._slots else f"constant {j}"

    def replay(self, *tensors: Any, **scalars: Any) -> Any:
        """Run the graph on ``tensors`` (one per slot): its outputs (one tensor, or a tuple)."""
        if self._calls is None:
            raise CaptureError("this graph was closed", fix="capture it again")
        values, scalar_values = self._bind(tensors, scalars)
        if self._launcher is not None:
            outs = self._launcher(tensors, scalar_values)
            self.replays += 1
            return outs[0] if len(outs) == 1 else tuple(outs)
        made = self._planned(values, scalar_values) if values and ENABLED else None
        if made is None:
            made = self._nodes(values, scalar_values, False)
        self.replays += 1
        outs = self._returned([*values, *made])
        return outs[0] if len(outs) == 1 else outs

    def _planned(
        self, values: list[Tensor], scalar_values: dict[str, Any]
    ) -> tuple[Tensor, ...] | None:
        """Every node's outputs, in order, from the graph's own op plan: the whole graph as one
        op call, keyed and recorded as an op handle's call is (its tensors are the borrowed
        ones, its attributes the scalars), replayed as one backend replay of all its launches.
        None where the key has no plan (not yet, or never: its nodes then run one by one)."""
        borrowed = tuple(values)
        if CALL is None:
            key, plan = self._plans.find(borrowed, scalar_values)
        else:  # the key, the lookup and the replay in C, as an op handle's call
            made = CALL(self._plans, borrowed, scalar_values)
            if type(made) is not Unplanned:
                return (made,) if type(made) is Tensor else made
            key, plan = made
        if key is None or plan is BLOCKED or (type(plan) is Learning and plan.given_up):
            return None
        if plan is None or type(plan) is Learning:
            call = partial(self._nodes, values, scalar_values, True)
            return self._plans.call_recorded(self.runtime, borrowed, key, plan, call)
        made = plan(borrowed)
        if made is REPLAY_MISS:
            return None
        return (made,) if type(made) is Tensor else made

    def _nodes(
        self, values: list[Tensor], scalar_values: dict[str, Any], one_session: bool
    ) -> tuple[Tensor, ...]:
        """Run the nodes one by one: each as its op handle's eager call (planned where its key
        is), or all in one session (``one_session``: the full path, which a recording of the
        whole graph records). Every node's outputs, in order."""
        calls = self._calls
        assert calls is not None
        tensors_now = [*values]  # the borrowed tensors, then each call's outputs as it makes them
        n = 0
        try:
            with self.runtime.session() if one_session else nullcontext() as s:
                for n, call in enumerate(calls):  # noqa: B007 - n names the failed node
                    args = call.take(tensors_now)
                    # (a call without scalars keeps its attributes with no call per node)
                    attrs = call.with_scalars(scalar_values) if call.scalars else call.attrs
                    if args and s is None:  # the op's own call: its plan where the key has one
                        result = call.handle(*args, **attrs)
                    elif s is None:
                        with self.runtime.session() as one:
                            result = call.handle.run_in(one._exec, args, attrs)
                    else:
                        result = call.handle.run_in(s._exec, args, attrs)
                    if call.single:
                        tensors_now.append(result)
                    else:
                        tensors_now += result
        except TenferroError as exc:
            name = calls[n].handle.name
            if exc.op is None:
                exc.op = name
            exc.add_note(f"in node {n} (op {name!r}) of a captured graph")
            raise
        return tuple(tensors_now[len(values) :])


__all__ = ["Capture", "CapturedGraph", "Slot"]

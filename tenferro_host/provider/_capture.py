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
from threading import get_ident as _get_ident
from typing import TYPE_CHECKING, Any

from ..errors import CaptureError, ValidationError
from ..tensor import Tensor
from ._capture_lock import locked
from ._capture_record import OUTSIDE, NativeCapture, OpCall, RecordedCall, Ref, Scalar, View, within
from ._captured_graph import CapturedGraph
from ._session import Session

if TYPE_CHECKING:
    from ._exec_session import ExecSession

#: Captures opened in this process (the bench shows that replays open none).
_opened = itertools.count()
_opened_count = 0


def captures_opened() -> int:
    """How many captures this process has opened (a replay opens none)."""
    return _opened_count


class Capture(Session):
    """``ex.capture()``: records the op calls of ``ex`` until the block ends (a sub-session)."""

    kind_name = "capture"

    def __init__(self, ex: ExecSession) -> None:
        super().__init__(ex.runtime, parent=ex)
        self._ex = ex
        self._calls: list[RecordedCall] = []
        self._borrowed: list[Tensor] = []  # tensors from outside the capture, leased to it
        self._refs: dict[int, Ref] = {}  # id(tensor) -> its reference
        self._made: list[tuple[Tensor, ...]] = []  # each call's outputs (keeps their ids valid)
        #: each view of a call's output: the output's reference, the view, the output
        self._views: list[tuple[Ref, Tensor, Tensor]] = []
        self._made_in: dict[int, list[tuple[Ref, Tensor]]] = {}  # id(storage) -> its outputs
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
        self._calls.append(RecordedCall(handle, args, values, scalars, outputs, single))
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

    def _tensor(self, ref: Ref, made: list[tuple[Tensor, ...]]) -> Any:
        """The tensor ``ref`` stands for when the calls are made again (``made``: their new
        outputs)."""
        kind, j, i = ref
        if kind == 0:
            return self._borrowed[j]
        if kind == 1:
            return made[j][i]
        (_, k, i), view, of = self._views[j]
        return View(0, view, of)([made[k][i]])

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

    def _ref(self, t: Any) -> Ref:
        ref = self._refs.get(id(t))
        if ref is None:
            of = self._output_of(t) if type(t) is Tensor else None
            if of is None:  # borrowed from outside (anything else the op's own checks refuse)
                ref = (0, len(self._borrowed), 0)
                self._borrowed.append(t)
            elif of is OUTSIDE:
                raise self.refuse(
                    "a tensor in the memory of a captured call's output but outside its elements",
                    "pass the output, or a view of it (slicing, permute), to the later call",
                )
            else:
                ref = self._view(t, of)
            self._refs[id(t)] = ref
        return ref

    def _output_of(self, t: Tensor) -> tuple[Ref, Tensor] | None:
        """The call output whose elements ``t`` views, and its reference; None for a tensor from
        outside; :data:`OUTSIDE` for one in an output's memory but outside its elements."""
        made = self._made_in.get(id(t.storage))
        if made is None:
            return None
        for ref, out in made:
            if within(t, out):
                return ref, out
        return OUTSIDE

    def _view(self, t: Tensor, of: tuple[Ref, Tensor]) -> Ref:
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
        refs: list[Ref] = []
        for n, t in enumerate(outputs):
            ref = self._refs.get(id(t))
            if ref is None and type(t) is Tensor:  # a view made after the call that made it
                of = self._output_of(t)
                ref = None if of is None or of is OUTSIDE else self._view(t, of)
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
                graph.launch_natively(found)
        return graph


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


__all__ = ["Capture"]

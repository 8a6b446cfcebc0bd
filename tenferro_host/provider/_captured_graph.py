"""A captured graph: the record of a capture bound to slots, replayed on new tensors — whole on
the device where the backend made a native graph, else as one planned op call of all its
launches, else node by node through the op handles.

The planned call writes the intermediates (the nodes' outputs a replay does not return, nor a
view of) into tensors the graph holds, as a native graph's memory does: a replay allocates only
what it returns. One thread at a time replays through them; another meanwhile runs the nodes.
"""

from __future__ import annotations

import copy
import itertools
import threading
from contextlib import nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import (
    AliasingError,
    CaptureError,
    ForeignRuntimeError,
    TenferroError,
    ValidationError,
)
from ..tensor import Tensor
from ._capture_record import RecordedCall, Ref, Scalar, Slot, View, taker, within
from ._compiled import FALLBACK, FIND, REPLAY
from ._op_plan import ENABLED, RECORDING, REPLAY_MISS
from ._plan_table import BLOCKED, Learning, PlanTable

if TYPE_CHECKING:
    from ._runtime import Runtime


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
    #: The launcher's compiled replay (``core``), tried first by a replay without new scalars.
    _core: Any = None

    def __init__(
        self,
        runtime: Runtime,
        calls: list[RecordedCall],
        borrowed: list[Tensor],
        slots: list[int],
        outputs: list[Ref],
        scalars: dict[str, Scalar],
        views: list[tuple[Ref, Tensor, Tensor]],
    ) -> None:
        self.runtime = runtime
        self._calls: list[RecordedCall] | None = calls
        self._borrowed = borrowed
        self._slots = slots
        self.slots = tuple(Slot.of(borrowed[j]) for j in slots)
        #: what each slot's tensor must be, compared as one tuple (the runtime apart)
        self._fits = [(t.dtype, t.shape, t.strides) for t in (borrowed[j] for j in slots)]
        #: each borrowed tensor that views an input's elements, made anew of a replay's input
        self._derived: list[tuple[int, View]] = []
        #: the borrowed tensors leased to the graph as they are (neither an input nor its view)
        self._constants: list[int] = []
        for j, t in enumerate(borrowed):
            if j in slots:
                continue
            of = next((s for s in slots if within(t, borrowed[s])), None)
            if of is None:
                self._constants.append(j)
            else:
                self._derived.append((j, View(of, t, borrowed[of])))
        #: where each call's outputs start among a replay's tensors (after the borrowed ones)
        starts, at = [], len(borrowed)
        for call in calls:
            starts.append(at)
            at += call.nout

        def pick(ref: Ref) -> int | View:
            kind, j, i = ref
            if kind == 2:  # a view of an earlier call's output
                (_, k, i), view, of = views[j]
                return View(starts[k] + i, view, of)
            return j if kind == 0 else starts[j] + i

        for call in calls:
            call.take = taker([pick(ref) for ref in call.args])
        returned = [pick(ref) for ref in outputs]
        self._returned = taker(returned)
        # the intermediates: outputs (by position among all the nodes') no returned tensor is
        # or views, compact as allocated; a planned replay makes the others, "fresh"
        reached = {p.source if type(p) is View else p for p in returned}
        nb, fresh = len(borrowed), []
        #: each intermediate's position and (dtype, shape)
        self._intermediates: dict[int, tuple[Any, tuple[int, ...]]] = {}
        for call, start in zip(calls, starts, strict=True):
            for i, layout in enumerate(call.layouts):
                if start + i in reached or layout is None:
                    fresh.append(start + i - nb)
                else:
                    self._intermediates[start + i - nb] = layout
        self._fresh = taker(fresh)  # the fresh outputs among all the nodes'
        to = {nb + p: nb + n for n, p in enumerate(fresh)}  # where each is in a planned replay's
        self._returned_planned = taker([_moved(p, to) for p in returned])
        #: the tensors held for the intermediates (made by the first planned replay), by position
        self._held: dict[int, Tensor] = {}
        self._holding = threading.Lock()
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

    def launch_natively(self, launcher: Any) -> None:
        """Replay through ``launcher`` (the backend's device graph, see NativeCapture), and
        through its compiled ``core`` where it has one and no borrowed tensors overlapped (the
        core checks that each slot's storage is its own)."""
        self._launcher, self.form = launcher, "native"
        self._core = None if self._overlaps else getattr(launcher, "core", None)

    def close(self) -> None:
        """Destroy the graph: its leases (constants, ops) are let go; replays are refused."""
        self._calls = self._core = None
        self._borrowed, self._held = [], {}
        self._plans.clear()
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
        core = self._core
        if core is not None and not scalars:
            made = core(tensors)
            if made is not FALLBACK:
                self.replays += 1
                return made
        if self._calls is None:
            raise CaptureError("this graph was closed", fix="capture it again")
        values, scalar_values = self._bind(tensors, scalars)
        if self._launcher is not None:
            outs = self._launcher(tensors, scalar_values)
            self.replays += 1
            return outs[0] if len(outs) == 1 else tuple(outs)
        made = None
        if values and ENABLED and self._holding.acquire(blocking=False):
            try:
                made = self._planned(values, scalar_values)
            finally:
                self._holding.release()
        self.replays += 1
        if made is None:
            outs = self._returned([*values, *self._nodes(values, scalar_values, False)])
        else:
            outs = self._returned_planned([*values, *made])
        return outs[0] if len(outs) == 1 else outs

    def _planned(
        self, values: list[Tensor], scalar_values: dict[str, Any]
    ) -> tuple[Tensor, ...] | None:
        """The fresh outputs, in order, from the graph's own op plan: the whole graph as one op
        call, keyed and recorded as an op handle's call is (keyed by the borrowed tensors, its
        attributes the scalars; its inputs the borrowed tensors then the held intermediates),
        replayed as one backend replay of all its launches. None where the key has no plan
        (not yet, or never: its nodes then run one by one). The caller holds ``_holding``."""
        borrowed = tuple(values)
        if FIND is None:
            key, plan = self._plans.find(borrowed, scalar_values)
        else:
            key, plan = FIND(self._plans, borrowed, scalar_values)
        if key is None or plan is BLOCKED or (type(plan) is Learning and plan.given_up):
            return None
        if plan is None and scalar_values is not self.scalars:
            # scalar values not seen before: the nodes run as eager calls (each on its own
            # plans), and the graph records them when they come again (a value new to each
            # replay would be recorded, never replayed)
            self._plans.defer(key, "new scalar values: recorded when they come again")
            return None
        held = self._held
        if len(held) != len(self._intermediates):  # the first planned replay makes them
            empty = self.runtime.empty
            held.update((p, empty(*layout)) for p, layout in self._intermediates.items())
        tensors = (*borrowed, *held.values())
        if plan is None or type(plan) is Learning:
            call = partial(self._recorded, values, scalar_values)
            return self._plans.call_recorded(self.runtime, tensors, key, plan, call, held)
        made = REPLAY(plan, tensors)
        if made is REPLAY_MISS:
            return None
        return (made,) if type(made) is Tensor else made

    def _recorded(self, values: list[Tensor], scalar_values: dict[str, Any]) -> Any:
        """The nodes in one session, recorded (each held intermediate handed out for its
        output): the fresh outputs."""
        made = self._nodes(values, scalar_values, True)
        rec = RECORDING.rec
        if rec is not None and any(made[p] is not t for p, t in self._held.items()):
            rec.refuse("a node allocated its outputs in another order than it returned them")
        return self._fresh(made)

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


def _moved(pick: int | View, to: dict[int, int]) -> int | View:
    """``pick`` (a position, or a view of the tensor at one) where ``to`` moves its position."""
    if isinstance(pick, View):
        moved = copy.copy(pick)
        moved.source = to[pick.source]
        return moved
    return to.get(pick, pick)


__all__ = ["CapturedGraph"]

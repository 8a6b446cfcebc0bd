"""The CUDA JIT session: ``ex.jit(op)`` on a CUDA exec session, built only on the raw seam.

The user API and the argument checks come from :class:`tenferro_host.provider.JitSession`
(identical on cpu, cuda and webgpu). What is CUDA's own:

* the session holds ONE raw sub-session (``ex.raw(op)``) for its whole scope; every launch is
  enqueued on the runtime's stream at once, so launches, raw work and downloads are ordered by
  submission — there is no host-side batch to submit;
* each specialization is generated as CUDA C (:mod:`.codegen`), compiled once by NVRTC for the
  live device's ``sm_XY`` (``features``) and cached per runtime with ``rs.resource``;
* each (kernel, argument kinds, constants, count, dim) gets a :class:`_Plan` holding a
  ``PreparedLaunch``: after the first launch, a launch costs argument conversion plus one
  ``PreparedLaunch.launch(args=...)`` — the base class's checks ran once for that plan, and each
  array argument's checks and raw form (ref, offset, len, shape, strides) once per session;
  a launch of arrays only that was seen before (same kernel, count, dim, argument objects)
  reuses its packed arguments, and is one ``launch()`` when it repeats the plan's last launch;
* a storage is borrowed once per session: shared while only read, exclusively as soon as a kernel
  writes it (the shared borrow is dropped first, with the converted arguments and prepared
  launches holding its ref; plans prepare again on their next launch). Views of one
  storage share that borrow (``tensor_strided`` / ``tensor_strided_mut``: the pointer is storage
  element 0), each with its own offset, shape and strides, so any layout may be read or written
  and aliased views work as on the other targets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tenferro_host import TenferroError, Tensor
from tenferro_host.cuda import raw
from tenferro_host.kernel import Kernel, Specialization, ir
from tenferro_host.provider import (
    ExecSession,
    Grid,
    JitBinding,
    JitLaunch,
    JitSession,
    Memo,
    MemoKind,
    convert_scalar,
    memo,
    require_resident,
)

from .codegen import generate, grid_shape, kernel_abi, kernel_symbol

#: Plans (prepared launches) one session keeps; more are dropped all at once.
MAX_PLANS = 256
#: Array arguments whose checks and packed form one session remembers.
MAX_CHUNKS = 4096
#: Launches of arrays only whose packed arguments one session remembers.
MAX_REPLAYS = 1024


_NOT_CONVERTED = (False, ())


class _Borrow:
    """The session's one borrow of a storage; the ref points at storage element 0."""

    __slots__ = ("exclusive", "ref")

    def __init__(self, ref: Any, exclusive: bool) -> None:
        self.ref = ref
        self.exclusive = exclusive


#: One runtime parameter in ABI order: (index in the arguments, name, dtype, raw typed-scalar
#: class of a scalar parameter or None for an array). Plain tuples: they unpack fastest.
_Slot = tuple[int, str, Any, "type | None"]


class _Layout:
    """What a specialization's ABI asks of a launch, derived once per specialization and shared
    by every session of every runtime (it depends on the specialization alone)."""

    __slots__ = ("arrays_only", "slots", "written")

    def __init__(self, spec: Specialization) -> None:
        index = {p.name: i for i, p in enumerate(spec.params)}
        slots: list[_Slot] = []
        for a in kernel_abi(spec):
            if a.role in ("data", "value"):
                assert a.param is not None
                scalar = getattr(raw, a.raw_type) if a.role == "value" else None
                slots.append((index[a.param], a.param, a.dtype, scalar))
        self.slots = tuple(slots)
        #: (index, name) of the arrays the kernel writes
        self.written = tuple((s[0], s[1]) for s in slots if s[1] in spec.ir.written)
        self.arrays_only = all(s[3] is None for s in slots)


#: Immutable launch pieces shared by all sessions: layouts by specialization key, configs and
#: hidden-count scalars by launch shape, view metadata scalars by view.
MAX_SHARED = 4096
_LAYOUTS: Memo[Any, _Layout] = memo("cuda_jit.layouts", MAX_SHARED, what="ABI layouts")
_SHAPES: Memo[Any, tuple[Any, tuple[Any, ...]]] = memo(
    "cuda_jit.shapes", MAX_SHARED, what="configs and counts by launch shape"
)
_METAS: Memo[Any, tuple[Any, ...]] = memo("cuda_jit.metas", MAX_SHARED, what="view metadata")
#: A runtime's plan templates (kept in its resources).
TEMPLATES = MemoKind("cuda_jit.templates", MAX_PLANS, what="a runtime's plan templates")


class _Template:
    """What a plan holds that no session owns — specialization, grid shape, ABI layout, launch
    config, hidden counts and the compiled function — shared by the jit sessions of one runtime
    (``rs.resource``): a new session's first launch of a known shape compiles nothing and looks
    nothing up."""

    __slots__ = ("config", "count", "function", "grid", "layout", "spec")

    def __init__(self, launch: JitLaunch, function: Any = None) -> None:
        spec = launch.spec
        self.spec = spec
        self.function = function
        self.grid = grid_shape(launch.count, launch.grid, launch.dim)
        self.layout = _LAYOUTS.get_or_make(spec.key, lambda: _Layout(spec))
        _, dynamic = ir.dynamic_shared_layout(spec.ir, launch.shared_sizes)
        self.config, self.count = _SHAPES.get_or_make(
            (launch.grid, launch.dim, launch.count, dynamic),
            lambda: (
                raw.LaunchConfig(launch.grid, launch.dim, dynamic),
                tuple(map(raw.u32, launch.count)),
            ),
        )


class _Plan:
    """A specialization compiled for one launch shape: what a cached launch replays.

    ``prepared`` is None until the first launch, and again after a borrow upgrade dropped it
    (with ``current``, the packed arguments it holds).
    """

    __slots__ = (
        "arrays_only",
        "config",
        "count",
        "current",
        "function",
        "prepared",
        "slots",
        "written",
    )

    def __init__(self, template: _Template, function: Any) -> None:
        layout = template.layout
        self.slots = layout.slots
        self.written = layout.written
        self.arrays_only = layout.arrays_only
        self.function = function
        self.config = template.config
        self.count = template.count
        self.prepared: Any = None
        self.current: list[Any] | None = None  # the packed arguments ``prepared`` holds


def _exact(value: Any) -> bool:
    """An int or a tuple of ints: a count or dim that may key a cached plan or replay
    (``4.0 == 4`` hashes alike, and a float count must still be refused by the full checks)."""
    kind = type(value)
    return kind is int or (kind is tuple and _INT_ONLY.issuperset(map(type, value)))


_INT_ONLY = frozenset({int})


class CudaJitSession(JitSession):
    """A DSL session on a CUDA runtime, launching through one raw sub-session."""

    target = "cuda"
    default_cube_dim = 256
    plans_launches = False  # its own plans (below), until they move onto the base's

    #: Test hook: a smaller per-dimension grid limit (x, y, z) than the device's, so that the fold
    #: of 1-D counts into 2-D/3-D grids is exercised at small sizes. None: the device's limits.
    max_grid_override: ClassVar[Grid | None] = None

    def __init__(self, exec_session: ExecSession, op: str) -> None:
        super().__init__(exec_session, op)
        self._ex = exec_session
        self._raw_op = op
        self._device = exec_session.device_info
        self._rs: Any = None
        self._plans: dict[Any, _Plan] = {}  # a session's tables: made per op, no memo
        self._borrows: dict[Any, _Borrow] = {}  # storage -> its borrow
        # argument (Tensor or JitBinding) -> (exclusive borrow?, (ref, offset, len, shape,
        # strides) as raw arguments): checked and converted once per session
        self._chunks: dict[Any, tuple[bool, tuple[Any, ...]]] = {}
        self._plan_key: Any = None
        # (kernel, count, dim, array arguments) -> (plan, packed arguments): launches of arrays
        # only, replayed without converting anything (dropped with a borrow upgrade)
        self._replays: dict[Any, tuple[_Plan, list[Any]]] = {}
        self._trusted: tuple[Any, ...] = ()  # the first launch of a plan: its checked tensors
        self._shared: Memo[Any, _Template] | None = None  # the runtime's plan templates

    # -- backend contract -------------------------------------------------------------------------
    @property
    def features(self) -> tuple[str, ...]:
        return (self._device.arch,)

    @property
    def max_grid(self) -> Grid:
        limits: Grid = self._device.max_grid_dims
        override = self.max_grid_override
        if override is None:
            return limits
        return (
            min(limits[0], override[0]),
            min(limits[1], override[1]),
            min(limits[2], override[2]),
        )

    @property
    def max_cube_threads(self) -> int:
        return int(self._device.max_threads_per_block)

    def _on_enter(self) -> None:
        self._rs = self._ex.raw(self._raw_op)
        self._rs.__enter__()
        self._domain = self.runtime.domain

    def _on_exit(self, error: BaseException | None) -> None:
        self._replays.clear()
        self._plans.clear()
        self._chunks.clear()
        self._borrows.clear()
        rs, self._rs = self._rs, None
        if error is None:
            rs.__exit__(None, None, None)
        else:
            rs.__exit__(type(error), error, error.__traceback__)

    # -- launches ---------------------------------------------------------------------------------
    def launch(  # noqa: C901 - hot path: replay, plan, or the full checks, fastest first
        self, kernel: Kernel, count: Any, dim: Any, *args: Any, **constants: Any
    ) -> None:
        """As :meth:`JitSession.launch`. A launch shape seen before replays its prepared plan;
        array arguments seen before with that plan replay their converted form."""
        self._check()
        if not (_exact(count) and _exact(dim)):  # e.g. a float count: the full checks say why
            super().launch(kernel, count, dim, *args, **constants)
            return
        if not constants:
            try:
                replay = self._replays.get((kernel, count, dim, args))
            except TypeError:  # unhashable count or dim
                replay = None
            if replay is not None:
                seen, packed = replay
                if seen.current is packed:  # the arguments its PreparedLaunch holds
                    seen.prepared.launch()
                else:
                    seen.prepared.launch(args=packed)
                    seen.current = packed
                return
        key: Any
        try:
            key = (
                kernel,
                count,
                dim,
                tuple(
                    [
                        (a.dtype, len(a.shape), a.is_compact()) if type(a) is Tensor else _kind(a)
                        for a in args
                    ]
                ),
                tuple(sorted((k, type(v), v) for k, v in constants.items())) if constants else (),
                tuple([args[i] for i in kernel.shared_size_args]),  # dynamic shared memory
            )
            plan = self._plans.get(key)
        except TypeError:  # unhashable count, dim or constant: no plan, launch checked in full
            key = plan = None
        if plan is None and key is not None:
            plan = self._shared_plan(key)  # planned by an earlier session of this runtime
        if plan is None:
            self._plan_key = key
            try:
                super().launch(kernel, count, dim, *args, **constants)
            finally:
                self._plan_key = None
            return
        try:
            packed = self._run(plan, args)
        except TenferroError as exc:
            if exc.op is None:
                exc.op = self.op
            raise
        if plan.arrays_only and not constants:
            # Arrays only: the argument objects (compared by identity) determine ``packed``.
            if len(self._replays) >= MAX_REPLAYS:
                self._replays.clear()
            self._replays[(kernel, count, dim, args)] = (plan, packed)

    def _dispatch(self, launch: JitLaunch) -> None:
        """First launch of a plan: compile (cached per runtime), prepare, enqueue."""
        template = _Template(launch)
        template.function = self._function(template.spec, template.grid)
        plan = _Plan(template, template.function)
        self._trusted = launch.args  # checked by the base class: not checked again
        try:
            self._run(plan, launch.args)
        finally:
            self._trusted = ()
        key = self._plan_key
        if key is not None:
            self._keep_plan(key, plan)
            self._templates().put((key, self.max_grid), template)

    def _templates(self) -> Memo[Any, _Template]:
        """The runtime's plan templates by (plan key, grid limits), kept in its resources."""
        if self._shared is None:
            self._shared = self._rs.resource(
                ("tenferro_host_cuda_jit", "templates"), TEMPLATES.new, 0
            )
        return self._shared

    def _shared_plan(self, key: Any) -> _Plan | None:
        """A plan of this session from the runtime's template for ``key``, if there is one:
        the launch's arguments are then checked and converted by :meth:`_pack` as for any plan
        (the base class checked the rest — kernel, count, dim, argument kinds — for this key)."""
        template = self._templates().get((key, self.max_grid))
        if template is None:
            return None
        plan = _Plan(template, template.function)
        self._keep_plan(key, plan)
        return plan

    def _keep_plan(self, key: Any, plan: _Plan) -> None:
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[key] = plan

    def _run(self, plan: _Plan, values: tuple[Any, ...]) -> list[Any]:
        """Pack the arguments and enqueue: ``launch(args=...)``, or prepare on first use."""
        packed = self._pack(plan, values)  # may drop plan.prepared (and its borrows): no local
        if plan.prepared is None:  # new, or dropped by a borrow upgrade in _pack
            plan.prepared = self._rs.prepare(plan.function, plan.config, packed)
            plan.current = packed
            plan.prepared.launch()
        else:
            plan.current = packed
            plan.prepared.launch(args=packed)
        return packed

    def _function(self, spec: Specialization, grid: str) -> Any:
        """The compiled kernel of ``spec`` for the grid shape ``grid``; its module is cached per
        runtime (``rs.resource``, bounded, counted by image size) under the specialization key,
        which names the kernel, argument types, constants, target and device arch."""
        module = self._rs.resource(
            ("tenferro_host_cuda_jit", spec.key, grid),
            lambda: self._rs.compile_nvrtc(generate(spec, grid).source),
        )
        return module.function(kernel_symbol(spec))

    # -- arguments --------------------------------------------------------------------------------
    def _pack(self, plan: _Plan, values: tuple[Any, ...]) -> list[Any]:
        """The raw argument list of one launch: refs, view metadata, scalars, logical count."""
        chunks = self._chunks
        for i, name in plan.written:  # (no local may hold a chunk here: an upgrade drops them)
            if not chunks.get(values[i], _NOT_CONVERTED)[0]:
                self._chunk(name, values[i], exclusive=True)
        packed: list[Any] = []
        for i, name, dtype, scalar in plan.slots:
            value = values[i]
            if scalar is None:
                found = chunks.get(value)
                packed.extend(found[1] if found is not None else self._chunk(name, value))
            else:
                packed.append(scalar(convert_scalar(name, dtype, value)))
        packed.extend(plan.count)
        return packed

    def _chunk(self, name: str, value: Any, exclusive: bool = False) -> tuple[Any, ...]:
        """Check, borrow (exclusive when written; shared unless already exclusive) and convert
        an array argument, once per session. A layout (offset, shape, strides) is checked once
        per process: its converted metadata is kept only after it passed."""
        if type(value) is Tensor and value.storage.domain is self._domain:
            t = value  # resident (checked inline); the common case
        else:
            t = value if type(value) is Tensor else self._array_arg(name, value)
            t = require_resident(self.runtime, t, argument=name, op=self.op)
        layout = (t.offset, t.shape, t.strides)
        meta = _METAS.get(layout)
        if meta is None:
            if t not in self._trusted:  # this launch's first tensors were checked already
                self._check_layout(name, t)
            meta = _METAS.put(
                layout,
                (
                    raw.u64(t.offset),
                    raw.u32(t.numel),
                    *map(raw.u32, t.shape),
                    *map(raw.u32, t.strides),
                ),
            )
        borrow = self._borrows.get(t.storage)
        if exclusive and (borrow is None or not borrow.exclusive):
            borrow = None  # no local may keep the shared ref alive through the upgrade
            borrow = self._borrow_exclusive(t)
        elif borrow is None:
            borrow = self._borrows[t.storage] = _Borrow(self._rs.tensor_strided(t), False)
        chunk = (borrow.ref, *meta)
        if len(self._chunks) >= MAX_CHUNKS:
            self._chunks.clear()
        self._chunks[value] = (borrow.exclusive, chunk)
        return chunk

    def _borrow_exclusive(self, t: Tensor) -> _Borrow:
        """The session's exclusive borrow of ``t``'s storage (``t`` is written)."""
        held = self._borrows.get(t.storage)
        if held is not None:
            # Shared -> exclusive: the raw seam refuses both at once. Drop the shared ref with
            # everything holding it: converted arguments and prepared launches (plans prepare
            # again on their next launch).
            del self._borrows[t.storage]
            self._rs.release(held.ref)  # ended now, whoever still holds the ref
            held = None
            self._chunks.clear()
            self._replays.clear()
            for plan in self._plans.values():
                plan.prepared = plan.current = None
        borrow = self._borrows[t.storage] = _Borrow(self._rs.tensor_strided_mut(t), True)
        return borrow


def _kind(value: Any) -> Any:
    """What of an argument selects a plan: dtype, ndim and compactness of a tensor (they select
    the specialization), else its type."""
    if type(value) is Tensor:
        return (value.dtype, len(value.shape), value.is_compact())
    if type(value) is JitBinding:
        t = value.tensor
        return (t.dtype, len(t.shape), t.is_compact())
    return type(value)


__all__ = ["MAX_CHUNKS", "MAX_PLANS", "MAX_REPLAYS", "CudaJitSession"]

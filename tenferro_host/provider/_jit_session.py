"""The JIT session every backend offers (``ex.jit(op)``): one API, one kernel object, any target.

:class:`JitSession` holds everything that is the same on cpu, cuda and webgpu: tensor bindings,
argument checking and scalar conversion, specialization, empty-launch skipping, the fold of a
cube count beyond the grid limits. A backend subclass supplies what differs (see
:class:`JitSession` "Backend contract") and receives one :class:`JitLaunch` per dispatch.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> x = cpu.upload(np.arange(4, dtype=np.float32))
>>> with cpu.session() as s, tf.cpu.exec_session(s).jit("doc.example") as js:
...     js.cube_count_1d(1000), js.cube_dim_1d()
((4, 1, 1), (256, 1, 1))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import (
    DTypeError,
    InvalidLaunchConfigError,
    TenferroError,
    UnsupportedError,
    ValidationError,
)
from ..kernel._autotune import Autotuned
from ..kernel._kernel import ArgDesc, ArrayDesc, Kernel, ScalarDesc, Specialization
from ..kernel.ir import U32_MAX, WARP, check_fragment_cube, check_shared_sizes, check_u32_array
from ..tensor import Tensor
from ._autotuning import launch_autotuned
from ._compiled import REPLAY
from ._exec_session import ExecSession
from ._op_plan import (
    ENABLED,
    RECORDING,
    REPLAY_MISS,
    JitLaunchRecord,
    OpRecording,
    exact_kind,
    record_into,
    sharing,
)
from ._residency import require_resident
from ._session import OutputSession, SessionHandle, _get_ident
from ._storage import require_writable

Grid = tuple[int, int, int]
_INT_ONLY = frozenset({int})
#: A launch key seen once: recorded (and planned) when it comes again.
_SEEN: Any = object()
#: A launch key whose recording could not be replayed: the full path from now on.
_NEVER: Any = object()


class JitBinding(SessionHandle):
    """A tensor (any view) bound to one JIT session; valid only inside it."""

    __slots__ = ("_tensor",)

    def __init__(self, session: JitSession, tensor: Tensor) -> None:
        super().__init__(session)
        self._tensor = tensor

    @property
    def tensor(self) -> Tensor:
        self._check()
        return self._tensor

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.tensor.shape

    def __repr__(self) -> str:
        t = self._tensor
        return f"<JitBinding {t.dtype.name}{list(t.shape)} strides={t.strides} offset={t.offset}>"


@dataclass(frozen=True)
class JitLaunch:
    """One checked dispatch handed to the backend.

    ``count`` is the logical cube count (what ``CUBE_COUNT*`` report), ``grid`` the physical one
    (equal to ``count`` unless folded; see :func:`fold_grid`), ``dim`` the units per cube.
    ``args`` align with ``spec.params``: a :class:`Tensor` for an array (resident, any layout),
    a numpy scalar of the parameter's dtype for a scalar. ``shared_sizes``: the element count of
    each shared array sized at launch (``spec.ir.dynamic_shared``), checked.
    """

    spec: Specialization
    count: Grid
    grid: Grid
    dim: Grid
    args: tuple[Tensor | np.generic, ...]
    shared_sizes: tuple[int, ...] = ()


def as_grid(value: Any, what: str) -> Grid:
    """An int or a sequence of 1-3 non-negative ints as (x, y, z), padding with 1."""
    tupled = type(value) is tuple and len(value) == 3 and _INT_ONLY.issuperset(map(type, value))
    if tupled and min(value) >= 0:  # already (x, y, z): checked in C
        return value
    dims = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        dims = tuple(dims)
    except TypeError:
        dims = None
    if (
        dims is None
        or not 1 <= len(dims) <= 3
        or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims
        )
    ):
        raise InvalidLaunchConfigError(
            f"the cube {what} must be an int or 1 to 3 non-negative ints, got {value!r}",
            argument=what,
        )
    padded = (*(int(d) for d in dims), 1, 1)
    return (padded[0], padded[1], padded[2])


def fold_grid(count: Grid, max_grid: Grid) -> Grid:
    """A physical grid within ``max_grid`` covering ``count``'s cubes.

    A count within the limits is kept. Otherwise its cubes are numbered linearly (x fastest) and
    laid out over x, then y, then z; generated kernels linearise the physical position, let
    surplus cubes exit and recover the logical ``CUBE_POS`` from the logical count.
    """
    if all(c <= m for c, m in zip(count, max_grid, strict=True)):
        return count
    total = math.prod(count)
    mx, my, mz = max_grid
    gx = min(total, mx)
    gy = min(-(-total // gx), my)
    gz = -(-total // (gx * gy))
    if gz > mz:
        raise InvalidLaunchConfigError(
            f"the cube count {count} ({total} cubes) exceeds what the grid limits {max_grid} can "
            "hold even folded; use larger cubes or split the launch",
            argument="count",
        )
    return (gx, gy, gz)


def _scalar_desc(value: Any) -> ScalarDesc | None:
    if isinstance(value, np.generic):
        try:
            return ScalarDesc(dtypes.dtype(value.dtype))
        except DTypeError:
            return None
    if isinstance(value, (bool, int, float)):
        return ScalarDesc()
    return None


_INT_RANGES: dict[str, tuple[int, int]] = {}


def _int_range(dtype: DType) -> tuple[int, int]:
    """[min, max] of an integer dtype, computed once (``np.iinfo`` costs a launch's worth)."""
    found = _INT_RANGES.get(dtype.name)
    if found is None:
        info = np.iinfo(dtype.numpy)
        found = _INT_RANGES[dtype.name] = (int(info.min), int(info.max))
    return found


def convert_scalar(name: str, dtype: DType, value: Any) -> np.generic:
    """``value`` (Python or numpy number) as a numpy scalar of ``dtype``, or a typed error."""
    py = value.item() if isinstance(value, np.generic) else value
    if dtype is dtypes.bool_:
        if not isinstance(py, bool):
            raise DTypeError(
                f"scalar {name!r} is bool; pass True or False, got {value!r}", argument=name
            )
        return np.bool_(py)
    if isinstance(py, bool):
        raise DTypeError(
            f"scalar {name!r} is {dtype.name}; pass a number, not a bool", argument=name
        )
    if dtype.is_integer:
        if not isinstance(py, int):
            raise DTypeError(
                f"scalar {name!r} is {dtype.name}; pass an int, got {value!r} (convert it "
                "explicitly if truncation is meant)",
                argument=name,
            )
        lo, hi = _int_range(dtype)
        if not lo <= py <= hi:
            raise ValidationError(
                f"scalar {name!r}={py} does not fit {dtype.name} ({lo}..{hi})", argument=name
            )
        return dtype.numpy.type(py)
    if not isinstance(py, (int, float)):
        raise DTypeError(
            f"scalar {name!r} is {dtype.name}; pass a real number, got {value!r}", argument=name
        )
    try:
        wide = float(py)
    except OverflowError:
        raise ValidationError(
            f"scalar {name!r} is {dtype.name}, and an int of {len(str(abs(py)))} digits is too "
            "large for any float; pass a float (e.g. float('inf') if infinity is meant)",
            argument=name,
        ) from None
    with np.errstate(over="ignore"):
        return dtype.numpy.type(wide)


def check_written_bindings(spec: Specialization, args: Sequence[Any]) -> None:
    """A kernel never writes a read-only borrow (e.g. a DLPack import of a read-only buffer):
    refused at launch, before any thread runs, on every backend."""
    for p, t in zip(spec.params, args, strict=True):
        if p.name in spec.ir.written and isinstance(t, Tensor):
            require_writable(t, f"kernel {spec.kernel_name!r} writes {p.name!r}", p.name)


class JitSession(OutputSession):
    """Base of every backend's DSL session (``ex.jit(op)``).

    User API: :meth:`binding`, :meth:`alloc_output`, :meth:`cube_count_1d`,
    :meth:`cube_dim_1d`, :meth:`launch`.

    Backend contract — a subclass sets or overrides:

    * ``target`` (class attribute): the specialization target, e.g. ``"cpu"``, ``"cuda"``,
      ``"webgpu"``;
    * ``features`` (property): the arch/feature strings that change generated code (e.g.
      ``("sm_90",)``, ``("shader-f16",)``); part of the specialization cache key;
    * ``max_grid`` (property): the largest cube count per dimension the backend dispatches;
    * ``max_cube_threads`` (property): the most units per cube;
    * ``default_cube_dim`` (class attribute or property): units per cube of ``cube_dim_1d``;
    * :meth:`_check_specialization` (optional): reject what the target cannot run, e.g. f64 on
      WebGPU, with ``UnsupportedError`` naming the feature;
    * :meth:`_dispatch`: compile (and cache) the specialization and enqueue or batch the launch;
      it returns the launch's replayable form (what the backend's ``op_replay`` needs besides
      the arguments, e.g. WebGPU's pipeline and uniform buffer), which the base records with
      the arguments' slots while an op call is recorded (:class:`JitLaunchRecord`), or None
      when a lower seam records the launch (CUDA's raw seam); a launch that cannot be replayed
      refuses the recording (:meth:`_refuse_plan`); a launch plan is the runtime's
      ``op_replay`` of the launch's recording (its inputs the arguments, no outputs);
    * ``_on_exit(error)``: submit a batch; ``_on_enter()``: acquire what the session needs.
    """

    kind_name = "JIT session"
    target: str = ""
    default_cube_dim: int = 256

    def __init__(self, exec_session: ExecSession, op: str | None) -> None:
        super().__init__(exec_session.runtime, op, parent=exec_session)

    # -------------------------------------------------------- backend contract

    @property
    def features(self) -> tuple[str, ...]:
        return ()

    @property
    def max_grid(self) -> Grid:
        raise NotImplementedError

    @property
    def max_cube_threads(self) -> int:
        raise NotImplementedError

    def _check_specialization(self, spec: Specialization) -> None:
        """Raise ``UnsupportedError`` for what this target cannot run (default: nothing)."""

    def _dispatch(self, launch: JitLaunch) -> Any:
        raise NotImplementedError

    @staticmethod
    def _refuse_plan(why: str) -> None:
        """The op call being recorded (if any) cannot be replayed: ``why`` says what."""
        rec = RECORDING.rec
        if rec is not None:
            rec.refuse(why)

    # -------------------------------------------------------- user API

    def binding(self, t: Tensor) -> JitBinding:
        """Bind a tensor of this runtime (any view) for launches in this session."""
        self._check()
        t = require_resident(self.runtime, t, argument="t", op=self.op)
        self._check_layout("t", t)
        return JitBinding(self, t)

    def cube_dim_1d(self) -> Grid:
        """The backend's default 1-D cube shape."""
        if self._owner != _get_ident():
            raise self._refusal()
        return (self.default_cube_dim, 1, 1)

    def cube_count_1d(self, n: int) -> Grid:
        """Enough 1-D cubes of :meth:`cube_dim_1d` for ``n`` units (``(0, 1, 1)`` for none)."""
        if self._owner != _get_ident():
            raise self._refusal()
        if type(n) is int and n >= 0:
            return (-(-n // self.default_cube_dim), 1, 1)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise ValidationError(
                f"cube_count_1d needs a non-negative int, got {n!r}", argument="n"
            )
        return (-(-int(n) // self.default_cube_dim), 1, 1)

    def launch(self, kernel: Kernel, count: Any, dim: Any, *args: Any, **constants: Any) -> None:
        """Launch ``kernel`` over ``count`` cubes of ``dim`` units.

        ``args`` are the kernel's runtime parameters in order: Tensors (bound implicitly),
        bindings of this session, or Python/numpy scalars (converted to the parameter's
        resolved type). Compile-time constants go by keyword. A launch with no work is checked,
        then skipped. A launch whose key (kernel, count, dim, each argument's layout or exact
        value, the constants) was recorded once before replays the runtime's ``op_replay`` of
        that recording; none is planned or replayed while an op call is recorded or a capture
        is open (the launch is then part of what they record).
        """
        if self._owner != _get_ident():
            raise self._refusal()
        key = None
        if ENABLED and RECORDING.rec is None and self.runtime.active_capture is None:
            key, args = _launch_key(self, kernel, count, dim, args, constants)
            if key is not None:
                plans = self.runtime.launch_plans
                plan = plans.get(key)
                if plan is None:
                    plans.put(key, _SEEN)  # recorded the next time it comes
                    key = None
                elif plan is not _SEEN:  # a replay, or never one: no recording again
                    if (
                        plan is not _NEVER
                        and (
                            plan(args) if plan.core is None else REPLAY(plan, args)  # compiled
                        )
                        is not REPLAY_MISS
                    ):
                        return
                    key = None
        try:
            if key is None:
                self._launch_checked(kernel, count, dim, args, constants)
            else:
                self._launch_recorded(key, kernel, count, dim, args, constants)
        except TenferroError as exc:
            if exc.op is None:
                exc.op = self.op
            raise

    def _launch_checked(
        self, kernel: Any, count: Any, dim: Any, args: Sequence[Any], constants: dict[str, Any]
    ) -> None:
        """The full path: every check, then the backend's dispatch."""
        if isinstance(kernel, Autotuned):  # it picks a config, then launches its kernel
            launch_autotuned(kernel, self, count, dim, args, constants)
        else:
            self._launch(kernel, count, dim, args, constants)

    def _launch_recorded(
        self,
        key: Any,
        kernel: Any,
        count: Any,
        dim: Any,
        args: tuple[Any, ...],
        constants: dict[str, Any],
    ) -> None:
        """The full path, with the backend's seam recording the launch (its arguments as the
        slots, bindings already their tensors); the runtime's replay of a clean recording of
        one launch becomes the key's plan."""
        rec = OpRecording(args)
        previous = record_into(rec)
        try:
            self._launch_checked(kernel, count, dim, args, constants)
        finally:
            record_into(previous)
        replay = None
        if rec.why is None and len(rec.launches) == 1 and not rec.outputs:
            replay = self.runtime.op_replay(rec)
        self.runtime.launch_plans.put(key, _NEVER if replay is None else replay)

    # -------------------------------------------------------- shared logic

    def _check_layout(self, name: str, t: Tensor) -> None:
        if t.strides and min(t.strides) < 0:
            raise UnsupportedError(
                f"{name} has a negative stride {t.strides}; DSL kernels index with u32 offsets: "
                "make a compact copy with backend.canonicalize(t)",
                backend=self.runtime.name,
                feature="negative strides",
            )
        lo, hi = t.span()
        check_u32_array(name, t.numel, hi - lo)

    def _array_arg(self, name: str, value: Any) -> Tensor | None:
        if isinstance(value, JitBinding):
            value._check()  # a binding of an ended session: SessionClosedError
            if value.session is not self:
                raise ValidationError(
                    f"argument {name!r} is a binding of another JIT session; bind the tensor in "
                    "this one",
                    argument=name,
                )
            return value.tensor
        if isinstance(value, Tensor):  # bound implicitly: the binding's checks, no handle
            t = require_resident(self.runtime, value, argument=name, op=self.op)
            self._check_layout(name, t)
            return t
        return None

    def _launch_args(
        self, kernel: Kernel, args: Sequence[Any]
    ) -> tuple[list[Tensor | Any], list[ArgDesc]]:
        """Each runtime argument checked against the kernel's declarations, with its desc."""
        decls = kernel.runtime_params
        if len(args) != len(decls):
            names = ", ".join(d.name for d in decls)
            raise ValidationError(
                f"kernel {kernel.name!r} takes {len(decls)} runtime argument(s) ({names}), got "
                f"{len(args)}; compile-time constants go by keyword",
                argument="args",
            )
        values: list[Tensor | Any] = []
        descs: list[ArgDesc] = []
        for decl, value in zip(decls, args, strict=True):
            tensor = self._array_arg(decl.name, value)
            if tensor is not None:
                values.append(tensor)
                descs.append(ArrayDesc(tensor.dtype, tensor.ndim, tensor.is_compact()))
                continue
            desc = _scalar_desc(value)
            if desc is None and (hasattr(value, "__array__") or hasattr(value, "__dlpack__")):
                require_resident(self.runtime, value, argument=decl.name, op=self.op)
            if desc is None:
                raise ValidationError(
                    f"argument {decl.name!r} of kernel {kernel.name!r} must be a Tensor, a "
                    f"binding or a number, got {type(value).__name__}",
                    argument=decl.name,
                )
            values.append(value)
            descs.append(desc)
        return values, descs

    def _launch(
        self, kernel: Kernel, count: Any, dim: Any, args: Sequence[Any], constants: dict[str, Any]
    ) -> None:
        if not isinstance(kernel, Kernel):
            raise ValidationError(
                f"launch needs a @K.kernel function, got {type(kernel).__name__}", argument="kernel"
            )
        count_xyz, dim_xyz = as_grid(count, "count"), as_grid(dim, "dim")
        values, descs = self._launch_args(kernel, args)
        capture = self.runtime.active_capture
        if capture is not None and not kernel.is_specialized(
            descs, constants, self.target, self.features
        ):
            raise capture.refuse(
                f"kernel {kernel.name!r} is not specialized for these argument types on "
                f"{self.target!r} yet, and a capture cannot compile: its specialization",
                f"call op {self.op!r} once with the same dtypes, ranks and constants before "
                "the capture (a warm-up)",
                self.op,
            )
        spec = kernel.specialize(descs, constants, self.target, self.features)
        self._check_specialization(spec)
        converted: list[Tensor | np.generic] = [
            v if isinstance(v, Tensor) else convert_scalar(p.name, p.dtype, v)
            for p, v in zip(spec.params, values, strict=True)
        ]
        threads_per_cube = math.prod(dim_xyz)
        if spec.bounds is not None and threads_per_cube > spec.bounds[0]:
            raise InvalidLaunchConfigError(
                f"kernel {spec.kernel_name!r} is declared for cubes of at most {spec.bounds[0]} "
                f"units (@K.kernel(max_units=...)); a cube of {dim_xyz} has {threads_per_cube}",
                argument="dim",
            )
        if threads_per_cube > self.max_cube_threads:
            raise InvalidLaunchConfigError(
                f"a cube of {dim_xyz} has {threads_per_cube} units; this backend allows at most "
                f"{self.max_cube_threads}",
                argument="dim",
            )
        if threads_per_cube % WARP and spec.ir.fragments:  # no call: a cached property
            check_fragment_cube(spec.ir, threads_per_cube)
        total = math.prod(count_xyz) * threads_per_cube
        if total == 0:
            return
        if total > U32_MAX:
            raise UnsupportedError(
                f"a launch of {total} units exceeds what u32 launch indices and cube counts "
                f"hold (at most {U32_MAX} units); split it",
                backend=self.runtime.name,
                feature="2^32 or more units per launch",
            )
        check_written_bindings(spec, converted)
        shared = spec.ir.shared_sizes(converted)
        check_shared_sizes(spec.ir, shared)
        grid = fold_grid(count_xyz, self.max_grid)
        launch = JitLaunch(spec, count_xyz, grid, dim_xyz, tuple(converted), shared)
        form = self._dispatch(launch)
        if form is not None:
            JitLaunchRecord.record(launch, form)


def _launch_key(  # noqa: C901 - one loop per piece, no call: a call costs what a plan saves
    session: JitSession, kernel: Any, count: Any, dim: Any, args: tuple[Any, ...], constants: Any
) -> tuple[tuple[Any, ...] | None, tuple[Any, ...]]:
    """What a launch plan is keyed by, and the arguments with each binding as its tensor.

    The key: the kernel, the count and dim (ints only), per argument its dtype, shape, strides,
    offset and runtime or its exact value and type, which arguments share a storage, the
    constants. None: this launch is never planned (an argument of another kind, a binding of
    another session, an unhashable constant, ...: the full path decides).
    """
    if type(count) is not tuple or type(dim) is not tuple:
        return None, args
    key: tuple[Any, ...] = (kernel, count, dim)
    storages: tuple[Any, ...] = ()  # a tuple grown in place: no call per tensor
    n, bound = 0, False
    for a in args:
        kind = type(a)
        if kind is JitBinding and a._session is session:  # valid: this session is open
            a, kind, bound = a._tensor, Tensor, True
        if kind is Tensor:
            storage = a.storage
            storages += (storage,)
            n += 1
            key += (a.dtype, a.shape, a.strides, a.offset, storage.runtime)
        elif kind is float:
            key += (kind, a) if a else (kind, a.hex())  # -0.0 == 0.0, and is not it
        elif kind is int or kind is bool:
            key += (kind, a)
        elif isinstance(a, np.generic):
            key += (kind, a.tobytes())
        else:
            return None, args
    for v in count + dim:  # (a loop, no call)
        if type(v) is not int:
            return None, args  # 4.0 == 4: a float count must still be refused by the full path
    if n > 1 and len(set(storages)) < n:
        key += (sharing(storages),)
    named = _constants_key(constants) if constants else ()
    if named is None:
        return None, args
    if bound:
        args = tuple(a._tensor if type(a) is JitBinding else a for a in args)
    return key + named, args


def _constants_key(constants: dict[str, Any]) -> tuple[Any, ...] | None:
    """The constants of a launch key (each name, value and exact kind), or None: unhashable."""
    try:
        named = tuple(sorted((k, v, exact_kind(v)) for k, v in constants.items()))
        hash(named)
    except TypeError:
        return None
    return named


__all__ = [
    "Grid",
    "JitBinding",
    "JitLaunch",
    "JitSession",
    "as_grid",
    "convert_scalar",
    "fold_grid",
]

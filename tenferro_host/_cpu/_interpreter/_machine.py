"""The interpreter's machine: one launch's lanes, locals, control masks and memory, and
:func:`run`, which checks a launch's arguments and runs the kernel body over every lane (the
package docstring states the semantics)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import UnsupportedError, ValidationError
from ...kernel import Specialization, ir
from ...kernel.ir import U32_MAX, check_u32_array
from ...provider import is_compact, numel, span
from ._copies import CopyMachine
from ._matrix import MatrixMachine
from ._numerics import COMPARE, FLOAT_OPS, INT_OPS, cast, math_func, read_modify_write
from ._shared import SharedMachine, SharedState
from ._subgroup import DEFAULT_SUBGROUP_SIZE, SubgroupMachine, check_subgroup_size

Grid = tuple[int, int, int]


@dataclass(frozen=True)
class ArrayArg:
    """An array argument: flat storage of the element dtype and the view into it."""

    storage: np.ndarray[Any, Any]
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def numel(self) -> int:
        return numel(self.shape)

    @property
    def extent(self) -> int:
        """Elements from the view's first to its last element (0 for an empty view)."""
        lo, hi = span(self.shape, self.strides, 0)
        return hi - lo


class _Loop:
    def __init__(self, n: int) -> None:
        self.broken = np.zeros(n, bool)
        self.continued = np.zeros(n, bool)


class _Machine(SharedMachine, CopyMachine, SubgroupMachine, MatrixMachine, ir.Visitor[Any]):
    """One launch's state: locals per lane, arrays, control masks."""

    def __init__(
        self,
        spec: Specialization,
        count: Grid,
        dim: Grid,
        args: Sequence[ArrayArg | Any],
        subgroup_size: int,
    ) -> None:
        self.spec = spec
        self.subgroup_size = subgroup_size
        self.kernel = spec.ir
        self.count = count
        self.dim = dim
        self.n = math.prod(count) * math.prod(dim)
        self.arrays: dict[str, ArrayArg] = {}
        self.values: dict[str, Any] = {}
        for param, arg in zip(spec.params, args, strict=True):
            if param.kind == "array":
                self.arrays[param.name] = arg
            else:
                self.values[param.name] = param.dtype.numpy.type(arg)
        for name, dtype in self.kernel.locals:
            self.values[name] = np.zeros(self.n, dtype.numpy)
        self.returned = np.zeros(self.n, bool)
        self.copy_groups = np.zeros(self.n, np.int64)
        self.loops: list[_Loop] = []
        self._indices: dict[str, Any] = {}
        self.per_cube = math.prod(dim)
        self.ncubes = math.prod(count)
        lane = np.arange(self.n, dtype=np.int64)
        self.cube_of, self.unit_of = lane // self.per_cube, lane % self.per_cube
        dynamic = dict(zip(self.kernel.dynamic_shared, self.kernel.shared_sizes(args), strict=True))
        self.shared = {
            d.name: SharedState(d, dynamic.get(d, d.size), self.ncubes) for d in self.kernel.shared
        }
        #: each lane's register arrays: (lanes, size), zeros as every local starts
        self.registers = {
            r.name: (r, np.zeros((self.n, r.size), r.dtype.numpy)) for r in self.kernel.registers
        }

    # -------------------------------------------------------- errors

    def fail(
        self,
        node: ir.Node,
        message: str,
        lanes: np.ndarray[Any, Any],
        argument: str | None = None,
        error: type[ValidationError] = ValidationError,
    ) -> ValidationError:
        thread = int(np.flatnonzero(lanes)[0])
        return error(
            f"kernel {self.kernel.name!r} at {ir.source_file(node, self.kernel)}:{node.line}: "
            f"{message} "
            f"(first offending thread: ABSOLUTE_POS={thread})",
            argument=argument,
        )

    # -------------------------------------------------------- statements

    def stopped(self) -> np.ndarray[Any, Any]:
        if self.loops:
            loop = self.loops[-1]
            return self.returned | loop.broken | loop.continued
        return self.returned

    def block(self, stmts: tuple[ir.Stmt, ...], active: np.ndarray[Any, Any]) -> None:
        for stmt in stmts:
            if not active.any():
                return
            self.stmt(stmt, active)
            active = active & ~self.stopped()

    def visit_Assign(self, s: ir.Assign, active: np.ndarray[Any, Any]) -> None:
        value = self.lanes(self.expr(s.value, active))
        self.values[s.name][active] = value[active]

    def visit_Store(self, s: ir.Store, active: np.ndarray[Any, Any]) -> None:
        index = self.expr(s.index, active)
        value = self.lanes(self.expr(s.value, active))[active]
        if s.array in self.shared:
            key = self.shared_access(s, "write", s.array, index, active)
            self.shared[s.array].data[key] = value
        elif s.array in self.registers:
            self.registers[s.array][1][active, self.register_index(s, s.array, index, active)] = (
                value
            )
        else:
            pos = self.address(s, s.array, index, active)
            self.arrays[s.array].storage[pos] = value

    def visit_LoadVector(self, s: ir.LoadVector, active: np.ndarray[Any, Any]) -> None:
        self.block(ir.scalar_accesses(s, self.kernel.element_type(s.array)), active)

    def visit_StoreVector(self, s: ir.StoreVector, active: np.ndarray[Any, Any]) -> None:
        self.block(ir.scalar_accesses(s, self.kernel.element_type(s.array)), active)

    def visit_Eval(self, s: ir.Eval, active: np.ndarray[Any, Any]) -> None:
        self.expr(s.value, active)

    def visit_If(self, s: ir.If, active: np.ndarray[Any, Any]) -> None:
        # a copy: a bare local's value is its live array, which the branch may assign
        cond = self.lanes(self.expr(s.cond, active)).copy()
        self.block(s.then, active & cond)
        self.block(s.orelse, active & ~cond)

    def visit_Break(self, s: ir.Break, active: np.ndarray[Any, Any]) -> None:
        self.loops[-1].broken |= active

    def visit_Continue(self, s: ir.Continue, active: np.ndarray[Any, Any]) -> None:
        self.loops[-1].continued |= active

    def visit_Return(self, s: ir.Return, active: np.ndarray[Any, Any]) -> None:
        self.returned |= active

    def visit_While(self, s: ir.While, active: np.ndarray[Any, Any]) -> None:
        frame = _Loop(self.n)
        self.loops.append(frame)
        running = active.copy()
        while True:
            running &= self.lanes(self.expr(s.cond, running))
            if not running.any():
                break
            frame.continued[:] = False
            self.block(s.body, running)
            running &= ~(frame.broken | self.returned)
        self.loops.pop()

    def visit_For(self, s: ir.For, active: np.ndarray[Any, Any]) -> None:
        counter = self.values[s.var]
        counter[active] = self.lanes(self.expr(s.start, active))[active]
        # copies: stop and step are evaluated once, even when the body assigns their locals
        stop = self.lanes(self.expr(s.stop, active)).copy()
        step = self.lanes(self.expr(s.step, active)).copy()
        zero = active & (step == 0)
        if zero.any():
            raise self.fail(s, "range step is zero", zero)
        positive = step > 0
        frame = _Loop(self.n)
        self.loops.append(frame)
        running = active.copy()
        while True:
            running &= np.where(positive, counter < stop, counter > stop)
            if not running.any():
                break
            frame.continued[:] = False
            self.block(s.body, running)
            running &= ~(frame.broken | self.returned)
            counter[running] += step[running]
        self.loops.pop()

    # -------------------------------------------------------- cooperation

    def visit_Atomic(self, e: ir.Atomic, active: np.ndarray[Any, Any]) -> Any:
        index = self.expr(e.index, active)
        value = self.lanes(self.expr(e.value, active))[active]
        compare = None if e.compare is None else self.lanes(self.expr(e.compare, active))[active]
        if e.array in self.shared:
            memory = self.shared[e.array].data
            pos = self.shared_access(e, "atomic", e.array, index, active)
        else:
            memory = self.arrays[e.array].storage
            pos = self.address(e, e.array, index, active)
        out = np.zeros(self.n, e.type.numpy)
        out[active] = read_modify_write(memory, pos, e.op, value, compare)
        return out

    # -------------------------------------------------------- memory

    def register_index(
        self, node: ir.Node, name: str, index: Any, active: np.ndarray[Any, Any]
    ) -> np.ndarray[Any, Any]:
        """The active lanes' element ``index`` of their register array ``name``, refused out of
        its bounds (a GPU would read or write another of the unit's values)."""
        size = self.registers[name][0].size
        return self.bounded(node, index, active, size, f"register array {name!r}", "it has")

    def address(
        self, node: ir.Node, name: str, index: Any, active: np.ndarray[Any, Any]
    ) -> np.ndarray[Any, Any]:
        arr = self.arrays[name]
        where = f"array {name!r}"
        idx = self.bounded(node, index, active, arr.extent, where, "the view spans", name)
        return arr.offset + idx

    def bounded(
        self,
        node: ir.Node,
        index: Any,
        active: np.ndarray[Any, Any],
        size: int,
        what: str,
        spans: str,
        argument: str | None = None,
    ) -> np.ndarray[Any, Any]:
        """The active lanes' ``index`` into ``what`` of ``size`` elements, refused outside it."""
        idx = self.lanes(index)[active]
        bad = (idx < 0) | (idx >= size)
        if bad.any():
            raise self.refuse(
                node,
                np.flatnonzero(active),
                bad,
                lambda k: f"index {idx[k]} of {what} is out of bounds ({spans} {size} elements)",
                argument=argument,
            )
        return idx.astype(np.int64)

    # -------------------------------------------------------- expressions

    def lanes(self, value: Any) -> np.ndarray[Any, Any]:
        """``value`` as one entry per lane (scalars broadcast, read-only)."""
        if isinstance(value, np.ndarray) and value.shape == (self.n,):
            return value
        return np.broadcast_to(value, (self.n,))

    def visit_Const(self, e: ir.Const, active: np.ndarray[Any, Any]) -> Any:
        return e.type.numpy.type(e.value)

    def visit_Var(self, e: ir.Var, active: np.ndarray[Any, Any]) -> Any:
        return self.values[e.name]

    def visit_ThreadIndex(self, e: ir.ThreadIndex, active: np.ndarray[Any, Any]) -> Any:
        return self.thread_index(e.name)

    def visit_ArrayLen(self, e: ir.ArrayLen, active: np.ndarray[Any, Any]) -> Any:
        return np.uint32(self.arrays[e.array].numel)

    def visit_ArrayShape(self, e: ir.ArrayShape, active: np.ndarray[Any, Any]) -> Any:
        return np.uint32(self.arrays[e.array].shape[e.axis])

    def visit_ArrayStride(self, e: ir.ArrayStride, active: np.ndarray[Any, Any]) -> Any:
        return np.uint32(self.arrays[e.array].strides[e.axis])

    def visit_AxisIndex(self, e: ir.AxisIndex, active: np.ndarray[Any, Any]) -> Any:
        value = self.expr(e.value, active)
        state = self.shared.get(e.array)
        registers = self.registers.get(e.array)
        if registers is not None:
            size, what = registers[0].shape[e.axis], "register array"
        elif state is not None:
            size, what = state.shape[e.axis], "shared array"
        else:
            size, what = self.arrays[e.array].shape[e.axis], "array"
        lanes = self.lanes(value)
        bad = active & ((lanes < 0) | (lanes >= size))
        if bad.any():
            raise self.fail(
                e,
                f"index {lanes[bad][0]} along dimension {e.axis} of {what} {e.array!r} is out "
                f"of bounds ({e.array}.shape[{e.axis}] is {size}); guard the access with "
                f"{e.array}.shape[{e.axis}]",
                bad,
                argument=e.array if what == "array" else None,
            )
        return value

    def visit_Load(self, e: ir.Load, active: np.ndarray[Any, Any]) -> Any:
        index = self.expr(e.index, active)
        out = np.zeros(self.n, e.type.numpy)
        if e.array in self.shared:
            key = self.shared_access(e, "read", e.array, index, active)
            out[active] = self.shared[e.array].data[key]
        elif e.array in self.registers:
            lanes = np.flatnonzero(active)
            out[active] = self.registers[e.array][1][
                lanes, self.register_index(e, e.array, index, active)
            ]
        else:
            out[active] = self.arrays[e.array].storage[self.address(e, e.array, index, active)]
        return out

    def visit_Unary(self, e: ir.Unary, active: np.ndarray[Any, Any]) -> Any:
        v = self.expr(e.operand, active)
        return np.logical_not(v) if e.op == "not" else np.negative(v)

    def visit_Compare(self, e: ir.Compare, active: np.ndarray[Any, Any]) -> Any:
        a, b = self.expr(e.lhs, active), self.expr(e.rhs, active)
        return COMPARE[e.op](a, b)

    def visit_Logical(self, e: ir.Logical, active: np.ndarray[Any, Any]) -> Any:
        a = self.lanes(self.expr(e.lhs, active))
        if e.op == "and":
            return a & self.lanes(self.expr(e.rhs, active & a))
        return a | self.lanes(self.expr(e.rhs, active & ~a))

    def visit_Cast(self, e: ir.Cast, active: np.ndarray[Any, Any]) -> Any:
        return cast(self.expr(e.value, active), e.value.type, e.type)

    def visit_Math(self, e: ir.Math, active: np.ndarray[Any, Any]) -> Any:
        return math_func(e.func, [self.expr(a, active) for a in e.args], e.type)

    def visit_Select(self, e: ir.Select, active: np.ndarray[Any, Any]) -> Any:
        cond = self.expr(e.cond, active)
        return np.where(cond, self.expr(e.if_true, active), self.expr(e.if_false, active)).astype(
            e.type.numpy, copy=False
        )

    def visit_Binary(self, e: ir.Binary, active: np.ndarray[Any, Any]) -> Any:
        a, b = self.expr(e.lhs, active), self.expr(e.rhs, active)
        t = e.type
        if t.is_float:
            result = FLOAT_OPS[e.op](a, b)
        elif e.op in ("floordiv", "mod"):
            zero = active & (self.lanes(b) == 0)
            if zero.any():
                raise self.fail(e, "integer division or remainder by zero", zero)
            b = np.where(self.lanes(b) == 0, t.numpy.type(1), b)
            r = np.fmod(a, b)
            result = r if e.op == "mod" else (a - r) // b
        else:
            result = INT_OPS[e.op](a, b)
        return np.asarray(result).astype(t.numpy, copy=False)

    def thread_index(self, name: str) -> Any:
        found = self._indices.get(name)
        if found is None:
            found = self._indices[name] = self._compute_index(name)
        return found

    def _compute_index(self, name: str) -> Any:
        (cx, cy, cz), (dx, dy, dz) = self.count, self.dim
        scalars = {
            "CUBE_DIM": dx * dy * dz,
            "CUBE_DIM_X": dx,
            "CUBE_DIM_Y": dy,
            "CUBE_DIM_Z": dz,
            "CUBE_COUNT": cx * cy * cz,
            "CUBE_COUNT_X": cx,
            "CUBE_COUNT_Y": cy,
            "CUBE_COUNT_Z": cz,
        }
        if name in scalars:
            return np.uint32(scalars[name])
        t = np.arange(self.n, dtype=np.int64)
        per_cube = dx * dy * dz
        cube, unit = t // per_cube, t % per_cube
        parts = {
            "ABSOLUTE_POS": t,
            "UNIT_POS": unit,
            "UNIT_POS_X": unit % dx,
            "UNIT_POS_Y": (unit // dx) % dy,
            "UNIT_POS_Z": unit // (dx * dy),
            "CUBE_POS": cube,
            "CUBE_POS_X": cube % cx,
            "CUBE_POS_Y": (cube // cx) % cy,
            "CUBE_POS_Z": cube // (cx * cy),
        }
        if name.startswith("ABSOLUTE_POS_"):
            axis = name[-1]
            value = self.thread_index("CUBE_POS_" + axis).astype(np.int64) * scalars[
                "CUBE_DIM_" + axis
            ] + self.thread_index("UNIT_POS_" + axis)
        else:
            value = parts[name]
        return value.astype(np.uint32)


def _check_shared_memory(kernel: ir.KernelIR, args: Sequence[ArrayArg | Any]) -> None:
    """A cube's shared arrays at this launch's sizes fit :data:`ir.CUBE_SHARED_BYTES`, checked
    before the machine allocates them for every cube (a size parameter of 2**30 would exhaust
    the host's memory instead)."""
    sizes = kernel.shared_sizes(args)
    ir.check_shared_sizes(kernel, sizes)
    nbytes = ir.shared_bytes(kernel, sizes)
    if nbytes > ir.CUBE_SHARED_BYTES:
        raise ir.shared_memory_error(
            kernel,
            nbytes,
            ir.CUBE_SHARED_BYTES,
            "the CPU interpreter",
            "shared memory per cube (what every CUDA GPU gives a block)",
            feature=f"shared memory beyond {ir.CUBE_SHARED_BYTES} bytes per cube",
        )


def run(
    spec: Specialization,
    count: Grid,
    dim: Grid,
    args: Sequence[ArrayArg | Any],
    subgroup_size: int = DEFAULT_SUBGROUP_SIZE,
) -> None:
    """Run ``spec`` over the grid ``count`` x ``dim``, reading and writing the array storages;
    subgroups have ``subgroup_size`` units (a power of two; 32 unless a test emulates another
    target's).

    ``args`` align with ``spec.params``: an :class:`ArrayArg` for an array (its storage dtype must
    be the parameter's), a Python or numpy number for a scalar (converted to its dtype).
    """
    if len(args) != len(spec.params):
        raise ValidationError(
            f"kernel {spec.kernel_name!r} takes {len(spec.params)} argument(s), got {len(args)}"
        )
    for param, arg in zip(spec.params, args, strict=True):
        if param.kind != "array":
            continue
        if not isinstance(arg, ArrayArg):
            raise ValidationError(f"parameter {param.name!r} needs an array", argument=param.name)
        if arg.storage.dtype != param.dtype.numpy or arg.storage.ndim != 1:
            raise ValidationError(
                f"array {param.name!r} needs flat {param.dtype.name} storage, got "
                f"{arg.storage.dtype} with {arg.storage.ndim} dims",
                argument=param.name,
            )
        if len(arg.shape) != param.ndim or len(arg.strides) != param.ndim:
            raise ValidationError(
                f"array {param.name!r} was specialized for {param.ndim} dims, got shape "
                f"{arg.shape}",
                argument=param.name,
            )
        if any(s < 0 for s in arg.strides):
            raise UnsupportedError(
                f"array {param.name!r} has a negative stride {arg.strides}; DSL kernels index "
                "with u32 offsets: canonicalize the view first",
                feature="negative strides",
            )
        check_u32_array(param.name, arg.numel, arg.extent)
        if param.compact and not is_compact(arg.shape, arg.strides):
            raise ValidationError(
                f"array {param.name!r} was specialized for a compact view, got shape {arg.shape} "
                f"with strides {arg.strides}; specialize with ArrayDesc(..., compact=False)",
                argument=param.name,
            )
        if arg.extent and (arg.offset < 0 or arg.offset + arg.extent > arg.storage.size):
            raise ValidationError(
                f"array {param.name!r}: the view (offset {arg.offset}, shape {arg.shape}, "
                f"strides {arg.strides}) exceeds its storage of {arg.storage.size} elements",
                argument=param.name,
            )
    n = math.prod(count) * math.prod(dim)
    if n == 0:
        return
    if n > U32_MAX:
        raise UnsupportedError(
            f"a launch of {n} threads exceeds what u32 launch indices hold (at most {U32_MAX}); "
            "split the work",
            feature="2^32 or more threads per launch",
        )
    _check_shared_memory(spec.ir, args)
    check_subgroup_size(subgroup_size)
    machine = _Machine(spec, count, dim, args, subgroup_size)
    with np.errstate(all="ignore"):
        machine.block(spec.ir.body, np.ones(n, bool))

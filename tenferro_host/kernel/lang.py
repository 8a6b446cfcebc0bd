"""The names a kernel body and signature are written with (``K.f32``, ``K.Array[K.F]``, ``K.sqrt``).

These objects are markers: the front-end recognises them in the parsed source. Python never runs
a kernel body, so calling one of them outside a kernel raises :class:`DslError` saying so.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import DslError


def _outside_kernel(name: str) -> DslError:
    return DslError(
        f"K.{name} is only meaningful inside a @K.kernel body; Python never runs a kernel body. "
        "Launch the kernel through a JIT session (ex.jit(op).launch(...))."
    )


@dataclass(frozen=True)
class KName:
    """A name of the language, shown as ``K.<name>``."""

    name: str

    def __repr__(self) -> str:
        return f"K.{self.name}"


@dataclass(frozen=True, repr=False)
class KFunction(KName):
    """A name a kernel calls (a cast, an intrinsic): calling it outside a kernel is refused."""

    def __call__(self, *args: Any) -> Any:
        """Refused outside a kernel: the call only has meaning in a kernel body."""
        raise _outside_kernel(self.name)


@dataclass(frozen=True, repr=False)
class KValue(KName):
    """A value a kernel reads (a launch index, a subgroup fact): testing it outside a kernel is
    refused."""

    def __bool__(self) -> bool:
        raise _outside_kernel(self.name)


@dataclass(frozen=True, repr=False)
class ScalarType(KFunction):
    """A concrete scalar type (``K.f32``): an annotation and, in kernels, a cast ``K.f32(x)``."""

    dtype: DType


@dataclass(frozen=True, repr=False)
class GenericType(KFunction):
    """A type variable resolved from the arguments at launch: ``K.F`` (float) or ``K.I`` (int).

    Every parameter annotated with the same generic shares one dtype in a specialization.
    """

    category: str  # "float" | "int"

    def accepts(self, dtype: DType) -> bool:
        """Whether ``dtype`` is of this generic's category."""
        if self.category == "float":
            return dtype.is_float
        return dtype.is_integer


ElementType = ScalarType | GenericType


@dataclass(frozen=True)
class ArrayType:
    """``K.Array[T]``: a tensor view parameter with element type ``T``."""

    element: ElementType

    def __repr__(self) -> str:
        return f"K.Array[{self.element!r}]"


def _caller_location() -> dict[str, Any]:
    """File, line and column of the expression that called into this module (an annotation
    such as ``K.Array[np.float32]`` evaluates when the ``def`` runs, before the front-end)."""
    frame = sys._getframe(2)
    positions = list(frame.f_code.co_positions())
    lineno, _end, col, _end_col = positions[frame.f_lasti // 2]
    return {
        "filename": frame.f_code.co_filename,
        "lineno": lineno or frame.f_lineno,
        "col_offset": col or 0,
    }


class _ArrayFactory:
    """``K.Array[T]`` builds an :class:`ArrayType`."""

    def __getitem__(self, element: Any) -> ArrayType:
        if not isinstance(element, (ScalarType, GenericType)):
            raise DslError(
                f"K.Array[{element!r}]: the element type must be a K scalar type "
                "(K.F, K.I, K.f32, K.f64, K.f16, K.i32, K.u32, K.i64, K.bool_)",
                **_caller_location(),
            )
        return ArrayType(element)

    def __repr__(self) -> str:
        return "K.Array"


@dataclass(frozen=True)
class ConstType:
    """``K.Const[T]``: a compile-time constant given at launch by keyword (part of the cache key).

    ``T`` is ``int``, ``float`` or ``bool`` (the value is an untyped literal in the body, so it
    takes the other operand's type) or a concrete K scalar type (a typed literal).
    """

    value_type: type | ScalarType

    def __repr__(self) -> str:
        inner = self.value_type
        name = inner.__name__ if isinstance(inner, type) else repr(inner)
        return f"K.Const[{name}]"


class _ConstFactory:
    def __getitem__(self, value_type: Any) -> ConstType:
        if value_type in (int, float, bool) or isinstance(value_type, ScalarType):
            return ConstType(value_type)
        raise DslError(
            f"K.Const[{value_type!r}]: a constant is an int, float, bool or a concrete K scalar "
            "type such as K.u32",
            **_caller_location(),
        )

    def __repr__(self) -> str:
        return "K.Const"


@dataclass(frozen=True, repr=False)
class Intrinsic(KFunction):
    """A math function (``K.sqrt``) or ``K.select``; ``arity`` is its number of arguments."""

    arity: int


@dataclass(frozen=True, repr=False)
class ThreadIndex(KValue):
    """A launch index such as ``K.ABSOLUTE_POS``; always ``u32``."""


Array = _ArrayFactory()
Const = _ConstFactory()

F = GenericType("F", "float")
I = GenericType("I", "int")  # noqa: E741 - the documented public name

f32 = ScalarType("f32", dtypes.float32)
f64 = ScalarType("f64", dtypes.float64)
f16 = ScalarType("f16", dtypes.float16)
i32 = ScalarType("i32", dtypes.int32)
u32 = ScalarType("u32", dtypes.uint32)
i64 = ScalarType("i64", dtypes.int64)
bool_ = ScalarType("bool_", dtypes.bool_)

SCALAR_TYPES: tuple[ScalarType, ...] = (f32, f64, f16, i32, u32, i64, bool_)

sqrt = Intrinsic("sqrt", 1)
exp = Intrinsic("exp", 1)
log = Intrinsic("log", 1)
sin = Intrinsic("sin", 1)
cos = Intrinsic("cos", 1)
tanh = Intrinsic("tanh", 1)
abs = Intrinsic("abs", 1)  # noqa: A001 - mirrors the math name users expect
floor = Intrinsic("floor", 1)
ceil = Intrinsic("ceil", 1)
min = Intrinsic("min", 2)  # noqa: A001
max = Intrinsic("max", 2)  # noqa: A001
fma = Intrinsic("fma", 3)
select = Intrinsic("select", 3)

# cooperation within a cube (v2): the front-end lowers these to ir.SharedArray, ir.SyncCube and
# ir.Atomic; atomics take (array, index, value) — compare_exchange (array, index, cmp, value) —
# and return the element's old value
shared = Intrinsic("shared", 2)
sync_cube = Intrinsic("sync_cube", 0)
atomic_add = Intrinsic("atomic_add", 3)
atomic_min = Intrinsic("atomic_min", 3)
atomic_max = Intrinsic("atomic_max", 3)
atomic_exchange = Intrinsic("atomic_exchange", 3)
atomic_compare_exchange = Intrinsic("atomic_compare_exchange", 4)

# each unit's own arrays (ir.RegisterArray): ``r = K.registers(K.f32, (8, 8))`` at the top
# level, indexed like a shared array; ``for i in K.static_range(8)`` is ``range`` with
# compile-time bounds that targets unroll (ir.For.unroll), so indices by ``i`` are constants
registers = Intrinsic("registers", 2)
static_range = Intrinsic("static_range", 3)  # 1 to 3 arguments, as range's

# asynchronous copies (ir.CopyAsync, ir.CommitCopies, ir.WaitCopies), statements:
# ``K.copy_async(s, at, x, start, count)`` starts copying x[start : start + count] into shared
# array s from ``at``, ``K.commit_copies()`` groups the unit's copies, ``K.wait_copies(n)``
# waits until at most its ``n`` newest groups are in flight
copy_async = Intrinsic("copy_async", 5)
commit_copies = Intrinsic("commit_copies", 0)
wait_copies = Intrinsic("wait_copies", 1)

# vector accesses: ``a, b, c, d = K.load4(x, k)`` reads elements 4k .. 4k+3 of x,
# ``K.store4(x, k, a, b, c, d)`` writes them (ir.LoadVector / ir.StoreVector)
load4 = Intrinsic("load4", 2)
store4 = Intrinsic("store4", 6)

THREAD_INDEX_NAMES: tuple[str, ...] = tuple(
    base + suffix
    for base in ("ABSOLUTE_POS", "UNIT_POS", "CUBE_POS", "CUBE_DIM", "CUBE_COUNT")
    for suffix in ("", "_X", "_Y", "_Z")
)
ABSOLUTE_POS = ThreadIndex("ABSOLUTE_POS")
ABSOLUTE_POS_X = ThreadIndex("ABSOLUTE_POS_X")
ABSOLUTE_POS_Y = ThreadIndex("ABSOLUTE_POS_Y")
ABSOLUTE_POS_Z = ThreadIndex("ABSOLUTE_POS_Z")
UNIT_POS = ThreadIndex("UNIT_POS")
UNIT_POS_X = ThreadIndex("UNIT_POS_X")
UNIT_POS_Y = ThreadIndex("UNIT_POS_Y")
UNIT_POS_Z = ThreadIndex("UNIT_POS_Z")
CUBE_POS = ThreadIndex("CUBE_POS")
CUBE_POS_X = ThreadIndex("CUBE_POS_X")
CUBE_POS_Y = ThreadIndex("CUBE_POS_Y")
CUBE_POS_Z = ThreadIndex("CUBE_POS_Z")
CUBE_DIM = ThreadIndex("CUBE_DIM")
CUBE_DIM_X = ThreadIndex("CUBE_DIM_X")
CUBE_DIM_Y = ThreadIndex("CUBE_DIM_Y")
CUBE_DIM_Z = ThreadIndex("CUBE_DIM_Z")
CUBE_COUNT = ThreadIndex("CUBE_COUNT")
CUBE_COUNT_X = ThreadIndex("CUBE_COUNT_X")
CUBE_COUNT_Y = ThreadIndex("CUBE_COUNT_Y")
CUBE_COUNT_Z = ThreadIndex("CUBE_COUNT_Z")

# subgroup operations (ir.SubgroupReduce / SubgroupShuffle / SubgroupBallot / SubgroupFact):
# the units of a subgroup (a CUDA warp) exchange values without shared memory; every unit of
# the subgroup must take part (the interpreter checks, like barriers)
subgroup_add = Intrinsic("subgroup_add", 1)
subgroup_min = Intrinsic("subgroup_min", 1)
subgroup_max = Intrinsic("subgroup_max", 1)
subgroup_shuffle = Intrinsic("subgroup_shuffle", 2)
subgroup_shuffle_xor = Intrinsic("subgroup_shuffle_xor", 2)
subgroup_ballot = Intrinsic("subgroup_ballot", 1)


@dataclass(frozen=True, repr=False)
class SubgroupFact(KValue):
    """``K.SUBGROUP_SIZE`` (units per subgroup, a launch fact) or ``K.SUBGROUP_UNIT_POS`` (the
    unit's lane in its subgroup); both ``u32``."""


SUBGROUP_SIZE = SubgroupFact("SUBGROUP_SIZE")
SUBGROUP_UNIT_POS = SubgroupFact("SUBGROUP_UNIT_POS")

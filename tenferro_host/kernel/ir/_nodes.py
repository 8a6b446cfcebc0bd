"""The IR's nodes, operator tables and the specialized kernel (:class:`KernelIR`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

from ...dtypes import DType
from ...errors import InvalidLaunchConfigError, UnsupportedError
from ._matrix import FragmentType, fragments
from ._node_base import Expr, Node, Stmt, walk

U32_MAX = 2**32 - 1
"""The largest u32: DSL kernels index and count launch units with u32."""


def check_u32_array(name: str, numel: int, extent: int) -> None:
    """Arrays index with u32: larger views are unsupported on every target."""
    if max(numel, extent) > U32_MAX:
        raise UnsupportedError(
            f"array {name!r} spans {max(numel, extent)} elements; DSL kernels index with u32, so "
            f"at most {U32_MAX} elements per view are supported; split the work",
            feature="arrays larger than 2^32-1 elements",
        )


# ---------------------------------------------------------------- operators

ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "pow")
"""``Binary.op``: ``div`` is float-only, ``floordiv``/``mod`` truncate toward zero (float ``mod``
is exact C ``fmod``), ``pow`` is float-only: see :data:`POW_SQUARING_MAX`."""

POW_SQUARING_MAX = 64
"""``x ** y`` for a finite nonzero ``x`` and an integer ``y`` with ``1 <= |y| <=`` this is
``x`` multiplied by repeated squaring in ``x``'s type (f16 in f32), ``1 / x**|y|`` for a
negative ``y``, on every target: exact whenever ``x**|y|`` is representable (every partial
power then is), where C ``pow`` and WGSL ``pow`` (``exp2(y * log2(x))``) need not be. Larger
exponents keep C ``pow``: each squaring doubles the relative error of the one before it."""

POW_SQUARING_BITS = POW_SQUARING_MAX.bit_length()
"""Bits of ``|y|`` the unrolled squaring reads (no loop: software adapters cap loop trips)."""

COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGICAL_OPS = ("and", "or")
UNARY_OPS = ("neg", "not")
ATOMIC_OPS = ("add", "min", "max", "exchange", "compare_exchange")
"""``Atomic.op``; float ``min``/``max`` follow :class:`Math`'s (the non-NaN operand; of two
zeros, min is -0 if either is, max +0 if either is); ``compare_exchange`` compares bit
patterns."""
MATH_FUNCS = (
    "sqrt",
    "exp",
    "log",
    "sin",
    "cos",
    "tanh",
    "abs",
    "floor",
    "ceil",
    "min",
    "max",
    "fma",
)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Const(Expr):
    """A typed literal; ``value`` is a Python int, float or bool already representable in
    ``type`` (floats already rounded to f16/f32 when ``type`` is narrower)."""

    value: int | float | bool


@dataclass(frozen=True)
class Var(Expr):
    """A local variable or a scalar parameter."""

    name: str


@dataclass(frozen=True)
class ThreadIndex(Expr):
    """A launch index (``ABSOLUTE_POS``, ``UNIT_POS_X`` ...), type ``u32``; ``name`` is one of
    :data:`tenferro_host.kernel.lang.THREAD_INDEX_NAMES`. The logical (unfolded) grid is meant."""

    name: str


@dataclass(frozen=True)
class ArrayLen(Expr):
    """``a.len``: number of elements of the view (product of its shape), ``u32``."""

    array: str


@dataclass(frozen=True)
class ArrayShape(Expr):
    """``a.shape[axis]``, ``u32``; ``axis`` is a compile-time int in ``[0, ndim)``."""

    array: str
    axis: int


@dataclass(frozen=True)
class ArrayStride(Expr):
    """``a.stride[axis]`` in elements, ``u32``."""

    array: str
    axis: int


@dataclass(frozen=True)
class AxisIndex(Expr):
    """``value`` (an integer, ``type``) as the index along dimension ``axis`` of ``array`` (a
    parameter or a shared array): one index of ``a[i, j]``, or the linear index of a strided 1-D
    view. Targets compute ``value`` and scale it by the stride; the interpreter first refuses
    one outside ``[0, a.shape[axis])``, which a GPU would quietly take to another element of
    the storage (the view's linear span does not bound each dimension)."""

    array: str
    axis: int
    value: Expr


@dataclass(frozen=True)
class Load(Expr):
    """``a[index]``: element ``offset + index`` of the storage; ``index`` has an integer type."""

    array: str
    index: Expr


@dataclass(frozen=True)
class Atomic(Expr):
    """``K.atomic_<op>(a, index, value)``: one indivisible read-modify-write of element
    ``index`` of array or shared array ``a``; the expression is the element's old value
    (``type`` is the element type). ``compare_exchange`` stores ``value`` only where the old
    bits equal ``compare``'s; ``compare`` is None for the other ops."""

    op: str
    array: str
    index: Expr
    value: Expr
    compare: Expr | None = None


@dataclass(frozen=True)
class Unary(Expr):
    """``neg`` (numeric, ints wrap) or ``not`` (bool)."""

    op: str
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    """Arithmetic on two operands of ``type`` (see :data:`ARITH_OPS`); ints wrap around."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Compare(Expr):
    """A comparison of two operands of one type; ``type`` is bool."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Logical(Expr):
    """Short-circuit ``and``/``or`` of two bools: ``rhs`` is evaluated only where it decides."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Cast(Expr):
    """Conversion to ``type``: float->int truncates and saturates to the type's range (NaN ->
    0), anything->bool is ``!= 0`` (NaN -> true), bool->number is 0/1."""

    value: Expr


@dataclass(frozen=True)
class Math(Expr):
    """A math function (:data:`MATH_FUNCS`) on arguments of ``type``; ``min``/``max`` of floats
    return the non-NaN operand (C ``fmin``); ``fma`` rounds once where the target fuses it."""

    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Select(Expr):
    """``K.select(cond, a, b)``: both ``a`` and ``b`` are evaluated (as WGSL ``select``)."""

    cond: Expr
    if_true: Expr
    if_false: Expr


# ---------------------------------------------------------------- statements


@dataclass(frozen=True)
class Assign(Stmt):
    """``name = value``; the local's type is ``value.type`` (declared in ``KernelIR.locals``)."""

    name: str
    value: Expr


@dataclass(frozen=True)
class Store(Stmt):
    """``array[index] = value``; ``value.type`` is the array's element type."""

    array: str
    index: Expr
    value: Expr


VECTOR_WIDTH = 4
"""Elements of one vector access (``K.load4``/``K.store4``): 16 bytes of 32-bit elements."""


@dataclass(frozen=True)
class LoadVector(Stmt):
    """``a, b, c, d = K.load4(array, k)``: local ``names[j]`` gets element ``index + j`` of the
    array's storage (from the view's offset), j < :data:`VECTOR_WIDTH`. The front-end emits it
    only for contiguous elements (a compact view or a shared array), with ``index`` (u32,
    ``4 * k``) held in a local: a multiple of 4, free of effects. A target reads the four as one
    16-byte access where the address is 16-byte aligned and otherwise as the four loads of
    :func:`scalar_accesses`; the result is the same."""

    array: str
    index: Expr
    names: tuple[str, ...]


@dataclass(frozen=True)
class StoreVector(Stmt):
    """``K.store4(array, k, a, b, c, d)``: element ``index + j`` of the array's storage gets
    ``values[j]`` (the element type); the rules of :class:`LoadVector` apply."""

    array: str
    index: Expr
    values: tuple[Expr, ...]


def scalar_accesses(s: LoadVector | StoreVector, element: DType) -> tuple[Stmt, ...]:
    """The vector access ``s`` as :data:`VECTOR_WIDTH` scalar loads or stores (the fallback of
    every target, and the whole of it where a target has no vector access)."""
    u32 = s.index.type
    at = [
        s.index
        if j == 0
        else Binary("add", s.index, Const(j, type=u32, line=s.line), type=u32, line=s.line)
        for j in range(VECTOR_WIDTH)
    ]
    if isinstance(s, LoadVector):
        return tuple(
            Assign(name, Load(s.array, k, type=element, line=s.line), line=s.line, file=s.file)
            for name, k in zip(s.names, at, strict=True)
        )
    return tuple(
        Store(s.array, k, v, line=s.line, file=s.file) for k, v in zip(at, s.values, strict=True)
    )


@dataclass(frozen=True)
class Eval(Stmt):
    """An expression evaluated for its effect (an atomic whose old value is not used)."""

    value: Expr


@dataclass(frozen=True)
class SyncCube(Stmt):
    """``K.sync_cube()``: every unit of the cube waits here until all have arrived; shared and
    global memory written before it is visible to the whole cube after it. Every unit of a cube
    must reach the same barrier (the interpreter checks; GPUs hang or misbehave)."""


@dataclass(frozen=True)
class If(Stmt):
    """``if cond: then else: orelse``."""

    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True)
class For(Stmt):
    """``for var in range(start, stop, step)`` with C semantics: ``var`` is the counter (the body
    cannot assign it); ``stop`` and ``step`` are evaluated once before the loop; a positive step
    runs while ``var < stop``, a negative one while ``var > stop``; a zero step is an error (the
    interpreter raises; GPU targets run no iteration). After the loop ``var`` holds the value
    that ended it."""

    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class While(Stmt):
    """``while cond: body``."""

    cond: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Break(Stmt):
    """``break`` out of the innermost loop."""


@dataclass(frozen=True)
class Continue(Stmt):
    """``continue`` with the innermost loop's next iteration."""


@dataclass(frozen=True)
class Return(Stmt):
    """A bare ``return``: the thread stops."""


CORE_STATEMENTS: tuple[type[Stmt], ...] = (
    Assign,
    Store,
    LoadVector,
    StoreVector,
    Eval,
    SyncCube,
    If,
    For,
    While,
    Break,
    Continue,
    Return,
)
"""The statements of this module (the matrix ones are :mod:`._matrix`'s)."""

CORE_EXPRESSIONS: tuple[type[Expr], ...] = (
    Const,
    Var,
    ThreadIndex,
    ArrayLen,
    ArrayShape,
    ArrayStride,
    AxisIndex,
    Load,
    Atomic,
    Unary,
    Binary,
    Compare,
    Logical,
    Cast,
    Math,
    Select,
)
"""The expressions of this module (the subgroup ones are :mod:`._subgroup`'s)."""


# ---------------------------------------------------------------- kernel


def source_file(node: Node, kernel: KernelIR) -> str:
    """The file ``node.line`` is a line of."""
    return node.file or kernel.filename


def in_file(node: Any, filename: str) -> Any:
    """``node`` (a node or a tuple of them) with ``file`` set to ``filename`` wherever it is
    still the kernel's (nodes of a device function inlined from another module)."""
    if isinstance(node, tuple):
        return tuple(in_file(n, filename) for n in node)
    if not isinstance(node, Node):
        return node
    changes = {
        f.name: in_file(getattr(node, f.name), filename)
        for f in fields(node)
        if f.name not in ("line", "file")
    }
    return replace(node, **changes, file=node.file or filename)


@dataclass(frozen=True)
class Param:
    """A runtime parameter: ``kind`` is ``"array"`` (``ndim`` set) or ``"scalar"``. ``compact``
    (arrays): the specialization is for column-major dense views, so a linear index is an
    element index of the view; otherwise the lowering follows or refuses it (``Load``)."""

    name: str
    kind: str
    dtype: DType
    ndim: int | None = None
    compact: bool = True


@dataclass(frozen=True)
class SharedArray:
    """``name = K.shared(T, size)``: ``size`` elements of ``dtype`` per cube, uninitialised
    (reading an element no unit wrote is an error in the interpreter). ``shape``: the
    compile-time dimensions of ``K.shared(T, (d0, d1, ...))`` (column-major; ``(size,)`` for
    one). A *dynamic* array (``K.shared(T, n)``, ``n`` a scalar parameter) has ``size_param``
    ``n`` and ``size`` 0: the launch sizes it (:meth:`KernelIR.shared_sizes`)."""

    name: str
    dtype: DType
    size: int
    line: int = 0
    shape: tuple[int, ...] = ()
    size_param: str | None = None


REGISTER_ARRAY_MAX = 256
"""Elements a register array may hold: a CUDA thread has at most 255 32-bit registers, so a
larger array could never stay in them."""


@dataclass(frozen=True)
class RegisterArray:
    """``name = K.registers(T, size)``: ``size`` elements of ``dtype`` per unit, zeros at the
    kernel's entry as every local is (``shape`` as :class:`SharedArray`'s, compile-time). A
    target keeps it in registers where every index is a constant (literals, ``K.static_range``
    counters, which the front-end unrolls); any other index is correct, in slower memory."""

    name: str
    dtype: DType
    size: int
    line: int = 0
    shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class KernelIR:
    """One specialized kernel.

    ``params`` are the runtime parameters in declaration order (compile-time constants are not
    among them: they are folded). ``locals`` maps every local (loop counters included) to its
    type; targets declare them all at function entry, zero-initialised, so a local read before
    any assignment on the path taken reads zero on every target. ``written`` names the arrays the
    body stores to (atomics included); ``atomic`` the arrays and shared arrays used by atomics;
    ``shared`` the cube's shared arrays, ``registers`` each unit's register arrays. Load and
    Store name a parameter, a shared array or a register array (one namespace); Atomic a
    parameter or a shared array.
    """

    name: str
    filename: str
    params: tuple[Param, ...]
    locals: tuple[tuple[str, DType], ...]
    body: tuple[Stmt, ...]
    written: frozenset[str]
    shared: tuple[SharedArray, ...] = ()
    atomic: frozenset[str] = frozenset()
    registers: tuple[RegisterArray, ...] = ()

    @cached_property
    def value_types(self) -> Mapping[DType, str]:
        """Every type a value of the kernel has (parameters, locals, shared arrays, every
        expression), with where it first appears; computed once per kernel IR."""
        found: dict[DType, str] = {}
        for p in self.params:
            found.setdefault(p.dtype, f"parameter {p.name!r}")
        for name, dt in self.locals:
            found.setdefault(dt, f"local {name!r}")
        for a in self.shared:
            found.setdefault(a.dtype, f"shared array {a.name!r}")
        for r in self.registers:
            found.setdefault(r.dtype, f"register array {r.name!r}")
        for node in walk(self.body):
            if isinstance(node, Expr):
                found.setdefault(node.type, f"an expression at line {node.line}")
        return found

    @cached_property
    def fragments(self) -> tuple[tuple[str, FragmentType], ...]:
        """The kernel's matrix fragments with their types (:func:`fragments`), walked once."""
        return tuple(fragments(self.body))

    @cached_property
    def dynamic_shared(self) -> tuple[SharedArray, ...]:
        """The shared arrays sized at launch, in declaration order."""
        return tuple(a for a in self.shared if a.size_param is not None)

    def shared_sizes(self, values: Sequence[Any]) -> tuple[int, ...]:
        """The element count of each dynamic shared array for a launch whose runtime arguments
        (aligned with :attr:`params`) are ``values``."""
        index = {p.name: k for k, p in enumerate(self.params)}
        return tuple(int(values[index[str(a.size_param)]]) for a in self.dynamic_shared)

    def shared_array(self, name: str) -> SharedArray | None:
        """The shared-memory array ``name`` of the kernel, or None (a global array)."""
        for a in self.shared:
            if a.name == name:
                return a
        return None

    def register_array(self, name: str) -> RegisterArray | None:
        """The register array ``name`` of the kernel's units, or None."""
        for r in self.registers:
            if r.name == name:
                return r
        return None

    def element_type(self, array: str) -> DType:
        """The element type of the parameter, shared array or register array ``array``."""
        declared = self.shared_array(array) or self.register_array(array)
        return declared.dtype if declared is not None else self.param(array).dtype

    def param(self, name: str) -> Param:
        """The runtime parameter ``name`` (KeyError if there is none)."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


DYNAMIC_SHARED_ALIGN = 16
"""Byte alignment of each dynamic shared array in the cube's dynamic shared memory (enough for
any element type and for 16-byte vector accesses)."""


def dynamic_shared_layout(kernel: KernelIR, sizes: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """The byte offset of each dynamic shared array (declaration order, each aligned to
    :data:`DYNAMIC_SHARED_ALIGN`) and the bytes they take together."""
    offsets, total = [], 0
    for a, n in zip(kernel.dynamic_shared, sizes, strict=True):
        offsets.append(total)
        nbytes = n * a.dtype.itemsize
        total += -(-nbytes // DYNAMIC_SHARED_ALIGN) * DYNAMIC_SHARED_ALIGN
    return tuple(offsets), total


CUBE_SHARED_BYTES = 48 * 1024
"""Shared memory every CUDA GPU gives a block without opting in to more: CUDA's limit on static
``__shared__`` arrays, and the CPU interpreter's budget per cube, so that a launch it runs fits
a GPU and a huge launch-sized array is refused before the interpreter allocates it (with its
race bookkeeping, some 50 bytes per element of each cube)."""


def shared_bytes(kernel: KernelIR, sizes: Sequence[int]) -> int:
    """Bytes of one cube's shared arrays at a launch's ``sizes`` (those of the arrays sized at
    launch) as CUDA lays them out: the static arrays, then :func:`dynamic_shared_layout`'s."""
    static = sum(a.size * a.dtype.itemsize for a in kernel.shared if a.size_param is None)
    return static + dynamic_shared_layout(kernel, sizes)[1]


def shared_memory_error(
    kernel: KernelIR,
    nbytes: int,
    limit: int,
    who: str,
    memory: str,
    *,
    feature: str,
    backend: str | None = None,
    added: str = "",
    fix: str = "",
) -> UnsupportedError:
    """The refusal of a launch whose cube needs more than a target's ``limit`` bytes of shared
    memory (the caller compares, so a launch that fits costs no call): ``nbytes`` of shared
    arrays at the launch's sizes, and what the target adds as ``added`` says. It reads "``who``
    grants ``limit`` bytes of ``memory``"; ``fix`` adds remedies to "use smaller shared
    arrays"."""
    return UnsupportedError(
        f"kernel {kernel.name!r} declares {nbytes} bytes of shared arrays (at this launch's "
        f"sizes){added}; {who} grants {limit} bytes of {memory}: use smaller shared arrays{fix}",
        backend=backend,
        feature=feature,
    )


def check_shared_sizes(kernel: KernelIR, sizes: Sequence[int]) -> None:
    """Each dynamic shared array gets 1 to ``U32_MAX`` elements (its size parameter's value)."""
    for a, n in zip(kernel.dynamic_shared, sizes, strict=True):
        if not 1 <= n <= U32_MAX:
            raise InvalidLaunchConfigError(
                f"shared array {a.name!r} of kernel {kernel.name!r} is sized by {a.size_param!r},"
                f" which is {n} at this launch; it needs 1 to {U32_MAX} elements",
                argument=a.size_param,
            )

"""The lowerer, one visitor over a kernel body's AST: its state, the helpers every handler uses
(types of literals, names, errors), and the dispatch through one table of handlers.

The handlers are plain functions grouped by topic (``_expressions``, ``_calls``,
``_statements``, ``_subgroup``, ``_matrix``), each module listing its own in ``HANDLERS``; the
package joins them into the :data:`Table` every lowerer looks its nodes up in. A key is an AST
node class (``ast.Name``, ``ast.For`` ...) or, for a call of a K intrinsic, the place of the
call and the intrinsic's name: ``("value", "atomic_add")`` in an expression, ``("statement",
"sync_cube")`` as a statement of its own, ``("assign", "shared")`` as the value of an
assignment."""

from __future__ import annotations

import ast
import builtins
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import dtypes
from ...dtypes import DType
from ...errors import DslError
from .. import ir, lang
from .._frontend import DeviceFunction, ParamDecl, ParsedKernel

MAX_EXPR_DEPTH = 100
"""Deepest expression nesting a kernel may use: generated code and the targets' own compilers
recurse over expressions, and a 500-term ``a + b + ...`` is 500 levels deep."""

RESERVED = re.compile(r"tf\d+_")


@dataclass(frozen=True)
class ArrayRef:
    """An array visible under some name: IR name, element type, ``ndim`` and ``compact`` for a
    parameter, or the declaration of a shared or a register array."""

    name: str
    dtype: DType
    ndim: int
    shared: ir.SharedArray | None = None
    compact: bool = True
    registers: ir.RegisterArray | None = None

    @property
    def declared(self) -> ir.SharedArray | ir.RegisterArray | None:
        """The kernel's own array (shared or registers), None for a parameter: its elements
        are contiguous, its strides constants, and a store to it writes no parameter."""
        return self.shared or self.registers

    @property
    def kind(self) -> str:
        """How a message names it: "shared array", "register array" or "array"."""
        if self.declared is None:
            return "array"
        return "shared array" if self.shared is not None else "register array"


@dataclass
class Frame:
    """An inlined device function call: where its result goes and how it returns early."""

    func: DeviceFunction
    result: str | None = None
    result_type: DType | None = None
    done: str | None = None  # set when returns need the one-trip loop wrapper


@dataclass(frozen=True)
class Untyped:
    """A literal whose type is decided by the operand it meets (see the module docstring)."""

    value: int | float


ExprResult = ir.Expr | Untyped

CallPlace = tuple[str, str]
"""Where a K intrinsic is called (``"value"``, ``"statement"`` or ``"assign"``) and its name."""

Table = Mapping[type[ast.AST] | CallPlace, Callable[..., Any]]
"""Each AST node class and intrinsic call place with its handler: ``handler(lowerer, node,
...)``."""


def join_tables(*tables: Table) -> dict[type[ast.AST] | CallPlace, Callable[..., Any]]:
    """One table of the topic modules' handlers; a key two of them handle is a TypeError."""
    joined: dict[type[ast.AST] | CallPlace, Callable[..., Any]] = {}
    for table in tables:
        for key, handler in table.items():
            if key in joined:
                raise TypeError(f"two lowering handlers for {key!r}")
            joined[key] = handler
    return joined


ARITH = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
}
COMPARE = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
}
_UNSUPPORTED_HINTS = {
    "With": "'with' is not supported in kernels",
    "AsyncWith": "'async with' is not supported in kernels",
    "Try": "exceptions do not exist on GPUs: 'try' is not supported; guard with 'if'",
    "TryStar": "exceptions do not exist on GPUs: 'try' is not supported; guard with 'if'",
    "Raise": "exceptions do not exist on GPUs: 'raise' is not supported",
    "Assert": "'assert' is not supported in kernels; guard with 'if'",
    "Global": "'global' is not supported: kernels write only arrays",
    "Nonlocal": "'nonlocal' is not supported: kernels write only arrays",
    "Import": "import modules outside the kernel",
    "ImportFrom": "import modules outside the kernel",
    "FunctionDef": "nested functions are not supported; write a separate kernel",
    "AsyncFunctionDef": "nested functions are not supported",
    "ClassDef": "classes are not supported in kernels",
    "Delete": "'del' is not supported in kernels",
    "Match": "'match' is not supported; use if/elif/else",
    "AsyncFor": "'async for' is not supported; use 'for i in range(...)'",
    "Lambda": "lambdas are not supported in kernels",
    "List": "lists are not supported in kernels; use arrays passed as parameters",
    "Tuple": "tuples are not supported in kernels; use separate variables",
    "Dict": "dicts are not supported in kernels",
    "Set": "sets are not supported in kernels",
    "ListComp": "comprehensions are not supported; write a for loop",
    "SetComp": "comprehensions are not supported; write a for loop",
    "DictComp": "comprehensions are not supported; write a for loop",
    "GeneratorExp": "generators are not supported; write a for loop",
    "IfExp": "conditional expressions are not supported; use K.select(cond, a, b) (it evaluates "
    "both a and b) or an if statement",
    "NamedExpr": "':=' is not supported; assign on a separate line",
    "JoinedStr": "strings are not supported in kernels",
    "Starred": "'*' unpacking is not supported in kernels",
    "Slice": "slices are not supported; index with a linear index",
    "Await": "'await' is not supported in kernels",
    "Yield": "'yield' is not supported in kernels",
    "YieldFrom": "'yield' is not supported in kernels",
}


#: The DSL's name of each scalar dtype (``K.f32`` ...), from the language's own types.
_TYPE_NAMES = {t.dtype.name: t.name for t in lang.SCALAR_TYPES}


def type_name(dtype: DType) -> str:
    return _TYPE_NAMES[dtype.name]


def compile_time_int(value: ExprResult) -> int | None:
    """``value``'s int when it is known at compile time (a literal, a ``K.Const[int]``, a module
    constant, an expression of them), else None (bools are not ints here)."""
    v = value.value if isinstance(value, (Untyped, ir.Const)) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def int_range(dtype: DType) -> tuple[int, int]:
    info = np.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


def round_float(value: float, dtype: DType) -> float:
    with np.errstate(all="ignore"):
        return float(dtype.numpy.type(value))


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class Lowerer:
    """Type-checks one function body for fixed generics, array ranks and constants: the state
    of lowering it, the helpers on types and names, and the dispatch of each node to its
    handler in ``table``."""

    def __init__(
        self,
        table: Table,
        parsed: ParsedKernel,
        generics: Mapping[str, DType],
        params: tuple[ir.Param, ...],
        constants: Mapping[str, Any],
    ) -> None:
        self.table = table
        self.parsed = parsed
        self.generics = generics
        self.params = {p.name: p for p in params}
        self.constants: dict[str, Untyped | ir.Const] = {}
        for decl in parsed.params:
            if decl.is_const:
                self.constants[decl.name] = self._constant(decl, constants[decl.name])
        self.arrays = {
            p.name: ArrayRef(p.name, p.dtype, p.ndim or 0, compact=p.compact)
            for p in params
            if p.kind == "array"
        }
        self.locals: dict[str, DType] = {}  # Python name -> type, in this frame
        self.decls: dict[str, DType] = {}  # IR name -> type, every frame of the kernel
        self.prefix = ""  # IR name = prefix + Python name
        self.loop_vars: list[str] = []
        self.written: set[str] = set()
        self.atomic: set[str] = set()
        self.shared: list[ir.SharedArray] = []
        self.registers: list[ir.RegisterArray] = []
        self.namespace = parsed.namespace()
        self.depth = 0
        self.pending: list[ir.Stmt] = []  # inlined calls of the statement being lowered
        self.frame: Frame | None = None
        self.calls: tuple[DeviceFunction, ...] = ()
        self.inlined = [0]  # shared counter for unique prefixes
        self.no_call_reason: str | None = None
        self.top_level: set[int] = set()  # ids of the kernel body's top-level statements
        #: Warp fragments, a namespace of their own (a fragment is no value: only the fragment
        #: statements name it).
        self.fragment_types: dict[str, ir.FragmentType] = {}
        #: Arrays of fragments (their shapes): each element is a fragment of its own, named
        #: in ``fragment_types``.
        self.fragment_arrays: dict[str, tuple[int, ...]] = {}

    # -------------------------------------------------------- dispatch

    def expr(self, node: ast.expr) -> ExprResult:
        """The value of expression ``node`` (its handler's), at most :data:`MAX_EXPR_DEPTH`
        deep."""
        handler = self.table.get(type(node))
        if handler is None:
            raise self.unsupported(node)
        if self.depth >= MAX_EXPR_DEPTH:
            raise self.error(
                node,
                f"this expression nests more than {MAX_EXPR_DEPTH} operations deep; split it "
                "into locals (e.g. partial sums), which every target compiles",
            )
        self.depth += 1
        try:
            result: ExprResult = handler(self, node)
        finally:
            self.depth -= 1
        return result

    def typed(self, node: ast.expr) -> ir.Expr:
        return self.default(node, self.expr(node))

    def block(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        """Lower a statement list; the statements of calls inlined while lowering a statement
        (``pending``) go ahead of it."""
        out: list[ir.Stmt] = []
        for stmt in stmts:
            handler = self.table.get(type(stmt))
            if handler is None:
                raise self.unsupported(stmt)
            outer, self.pending = self.pending, []
            try:
                lowered = handler(self, stmt)
                out.extend(self.pending)
            finally:
                self.pending = outer
            out.extend(lowered)
            done = self.frame.done if self.frame is not None else None
            if (
                done is not None
                and isinstance(stmt, (ast.For, ast.While))
                and any(isinstance(n, ast.Return) for n in ast.walk(stmt))
            ):
                line = self.line(stmt)  # an inlined function returned inside this loop
                out.append(
                    ir.If(
                        ir.Var(done, type=dtypes.bool_, line=line),
                        (ir.Break(line=line),),
                        (),
                        line=line,
                    )
                )
        return tuple(out)

    def call_handler(self, place: str, fn: Any) -> Callable[..., Any] | None:
        """The handler of a call of ``fn`` at ``place`` when ``fn`` is a K intrinsic that has
        one there, else None."""
        if not isinstance(fn, lang.Intrinsic):
            return None
        return self.table.get((place, fn.name))

    def single_target(self, node: ast.Assign) -> ast.expr:
        """The one target of an assignment (``a = b = x`` is refused)."""
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = x) is not supported")
        return node.targets[0]

    def callee(self, node: ast.expr) -> Any:
        """What ``node`` calls when it is a call of a name that is no runtime value (a K
        intrinsic, a device function ...), else None."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
            return None
        if isinstance(node.func, ast.Name) and self.is_runtime_name(node.func.id):
            return None
        return self.static(node.func)

    # -------------------------------------------------------- helpers

    def error(self, node: ast.AST, message: str) -> DslError:
        return self.parsed.error(node, message)

    def _constant(self, decl: ParamDecl, value: Any) -> Untyped | ir.Const:
        assert isinstance(decl.annotation, lang.ConstType)
        vt = decl.annotation.value_type
        line = decl.lineno
        if isinstance(vt, lang.ScalarType):
            return ir.Const(value, type=vt.dtype, line=line)
        if vt is bool:
            return ir.Const(bool(value), type=dtypes.bool_, line=line)
        return Untyped(value)

    def resolve_type(self, node: ast.AST, obj: Any) -> DType:
        """The dtype a scalar annotation or cast object stands for in this specialization."""
        if isinstance(obj, lang.ScalarType):
            return obj.dtype
        if isinstance(obj, lang.GenericType):
            if obj.name not in self.generics:
                raise self.error(
                    node,
                    f"K.{obj.name} is not bound in this kernel: no parameter is annotated with "
                    f"K.{obj.name}; use a concrete type such as "
                    f"{'K.f32' if obj.category == 'float' else 'K.i32'}",
                )
            return self.generics[obj.name]
        raise self.error(node, f"{obj!r} is not a kernel scalar type")

    def materialize(self, node: ast.AST, value: ExprResult, dtype: DType) -> ir.Expr:
        """``value`` as an expression of ``dtype``: literals adapt, typed values must match."""
        if isinstance(value, ir.Expr):
            if value.type is not dtype:
                raise self.error(
                    node,
                    f"a {type_name(value.type)} value where {type_name(dtype)} is needed: "
                    f"types never mix implicitly; cast with K.{type_name(dtype)}(...)",
                )
            return value
        line = self.line(node)
        v = value.value
        if dtype is dtypes.bool_:
            raise self.error(node, f"the literal {v!r} is not a bool; write True/False or compare")
        if dtype.is_float:
            try:
                return ir.Const(round_float(float(v), dtype), type=dtype, line=line)
            except OverflowError:
                raise self.error(
                    node,
                    f"the literal {v} is too large for any float type; "
                    "write a float literal such as 1e300",
                ) from None
        if isinstance(v, float):
            raise self.error(
                node,
                f"the float literal {v!r} meets an integer ({type_name(dtype)}) operand; cast "
                f"explicitly: K.{type_name(dtype)}({v!r}) truncates, or cast the other operand "
                "to a float type",
            )
        lo, hi = int_range(dtype)
        if not lo <= v <= hi:
            raise self.error(
                node,
                f"the literal {v} does not fit {type_name(dtype)} (range {lo}..{hi}); cast the "
                "other operand to a wider or signed type",
            )
        return ir.Const(int(v), type=dtype, line=line)

    def default(self, node: ast.AST, value: ExprResult) -> ir.Expr:
        """A value that meets no typed operand: untyped ints become i32 (signed, as in Python:
        ``k = 0; k - 1 < 0`` holds), floats f32."""
        if isinstance(value, ir.Expr):
            return value
        if isinstance(value.value, float):
            return self.materialize(node, value, dtypes.float32)
        lo, hi = int_range(dtypes.int32)
        if not lo <= value.value <= hi:
            raise self.error(
                node,
                f"the literal {value.value} has no type here and does not fit the default i32; "
                f"write K.u32({value.value}) or K.i64({value.value})",
            )
        return self.materialize(node, value, dtypes.int32)

    def default_together(self, node: ast.AST, values: list[ExprResult]) -> list[ir.Expr]:
        """Untyped literals that meet only each other (``K.select(c, 1, 2.5)``): one type for
        all, f32 if any is a float, else the int default."""
        if any(isinstance(v, Untyped) and isinstance(v.value, float) for v in values):
            return [self.materialize(node, v, dtypes.float32) for v in values]
        return [self.default(node, v) for v in values]

    def unify(self, node: ast.AST, values: list[ExprResult]) -> list[ir.Expr] | None:
        """Operands of one type, or None when all are untyped literals (caller folds)."""
        typed = [v for v in values if isinstance(v, ir.Expr)]
        if not typed:
            return None
        first = typed[0].type
        for other in typed[1:]:
            if other.type is not first:
                a, b = type_name(first), type_name(other.type)
                raise self.error(
                    node,
                    f"operands of different types ({a} and {b}) never mix implicitly; cast one, "
                    f"e.g. K.{a}(...) or K.{b}(...)",
                )
        return [self.materialize(node, v, first) for v in values]

    def line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.parsed.line_offset

    def unsupported(self, node: ast.AST) -> DslError:
        kind = type(node).__name__
        hint = _UNSUPPORTED_HINTS.get(kind, f"'{kind}' is not part of the kernel language")
        return self.error(node, hint)

    # -------------------------------------------------------- static names

    def static(self, node: ast.expr) -> Any:
        """The Python object a non-local name or attribute chain denotes, or raise."""
        if isinstance(node, ast.Name):
            if node.id in self.namespace:
                return self.namespace[node.id]
            if hasattr(builtins, node.id):
                return getattr(builtins, node.id)
            raise self.error(node, f"name {node.id!r} is not defined")
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if not inspect.ismodule(base):
                raise self.error(
                    node,
                    f"attribute {node.attr!r} of {base!r} is not part of the kernel language "
                    "(arrays have .len, .shape[k] and .stride[k])",
                )
            if not hasattr(base, node.attr):
                raise self.error(node, f"module {base.__name__!r} has no attribute {node.attr!r}")
            return getattr(base, node.attr)
        raise self.unsupported(node)

    def is_runtime_name(self, name: str) -> bool:
        return (
            name in self.locals
            or name in self.params
            or name in self.constants
            or name in self.arrays
            or name in self.fragment_types
            or name in self.fragment_arrays
        )

    def is_fragment(self, name: str) -> bool:
        """Whether ``name`` is a fragment or an array of them in the kernel body."""
        return self.frame is None and (name in self.fragment_types or name in self.fragment_arrays)

"""Front-end: a kernel's Python source -> typed IR (:mod:`tenferro_host.kernel.ir`).

:class:`ParsedKernel` reads and parses the source once, when ``@K.kernel`` decorates a function,
and checks the signature. :func:`lower` type-checks the body for one set of resolved types and
constants (a specialization) and returns a :class:`~tenferro_host.kernel.ir.KernelIR`.

Typing rules (identical on every target):

* Launch indices, ``a.len``, ``a.shape[k]``, ``a.stride[k]`` are ``u32``.
* An untyped literal (``2``, ``0.5``, a ``K.Const[int|float]`` constant, a module-level
  int/float constant) takes the type of the other operand. An int literal becomes a float when
  the other operand is a float; a float literal next to an int operand is a ``DslError`` (cast
  explicitly). An int literal that does not fit the other operand's type is a ``DslError``.
  Two untyped literals fold at compile time with C semantics; a fold with no finite real value
  is a ``DslError``.
* A literal that meets no typed operand (``j = 0``, ``range(10)``) defaults to ``i32`` (ints:
  signed, as in Python) or ``f32`` (floats); literals that meet only each other
  (``K.select(c, 1, 2.5)``) share one type, f32 if any is a float. Write ``K.u32(0)`` or
  ``K.F(0)`` for another type. A float literal cast to an int saturates like a run-time cast.
* Two typed operands of different types never mix: ``DslError`` asking for a cast.
* ``/`` and ``**`` need floats; ``//`` and ``%`` truncate toward zero for ints and floats.
* ``and``/``or``/``not``/``if``/``while`` take bools (compare explicitly); ``and``/``or``
  short-circuit. Chained comparisons ``a < b < c`` mean ``a < b and b < c``.
* A local keeps the type of its first assignment (``x: K.f32 = 0`` declares it). Locals are
  function-scoped, as in Python; the loop variable of ``for`` is read-only inside its loop.
* ``**`` is ``pow`` (floats); an int literal exponent becomes a float of the base's type.

Names in a body resolve to parameters, locals, compile-time constants, then the function's
globals and closure: K names (``K.sqrt``, ``K.ABSOLUTE_POS`` ...), ``range`` and int/float/bool
values (read when the kernel is first specialized; they are not part of the cache key — use
``K.Const`` for values that change). The body is type-checked at specialization, when the
argument types are known; the signature is checked at decoration.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import DslError
from . import ir, lang

U32_MAX = 2**32 - 1

MAX_EXPR_DEPTH = 100
"""Deepest expression nesting a kernel may use: generated code and the targets' own compilers
recurse over expressions, and a 500-term ``a + b + ...`` is 500 levels deep."""

_NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True)
class ParamDecl:
    """One declared kernel parameter: its annotation and where it is written."""

    name: str
    annotation: lang.ArrayType | lang.ScalarType | lang.GenericType | lang.ConstType
    default: Any
    lineno: int
    col_offset: int

    @property
    def is_const(self) -> bool:
        return isinstance(self.annotation, lang.ConstType)


class ParsedKernel:
    """A kernel function's parsed source, checked signature and name-resolution namespace."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
            raise DslError(f"@K.kernel decorates a function defined with def, not {fn!r}")
        code = fn.__code__
        self.name = fn.__name__
        self.filename = code.co_filename
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise DslError(
                f"the source of kernel {fn.__name__!r} is not available: kernel source must live "
                "in a file (not an interactive session, exec or eval); move the kernel into a "
                "module",
                filename=self.filename,
                lineno=code.co_firstlineno,
                col_offset=0,
            ) from exc
        source = "".join(lines)
        self.line_offset = start - 1
        if lines and lines[0][:1] in (" ", "\t"):
            source = "if True:\n" + source  # keeps the original columns of an indented def
            self.line_offset -= 1
        tree = ast.parse(source, filename=self.filename)
        node = tree.body[0]
        if isinstance(node, ast.If):
            node = node.body[0]
        if not isinstance(node, ast.FunctionDef):
            raise self.error(node, "@K.kernel decorates a plain def function (not async)")
        self.func = node
        self._fn = fn
        self.params = self._check_signature(fn)

    def namespace(self) -> Mapping[str, Any]:
        """The function's closure and globals as they are now: a specialization reads them
        when it is made (names defined after the ``def`` resolve too)."""
        return ChainMap(dict(inspect.getclosurevars(self._fn).nonlocals), self._fn.__globals__)

    def error(self, node: ast.AST, message: str) -> DslError:
        """A DslError located at ``node`` (absolute file line, column of the source)."""
        return DslError(
            message,
            filename=self.filename,
            lineno=getattr(node, "lineno", 1) + self.line_offset,
            col_offset=getattr(node, "col_offset", 0),
        )

    def _check_signature(self, fn: Callable[..., Any]) -> tuple[ParamDecl, ...]:
        args = self.func.args
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                raise self.error(extra, "kernels take named parameters only (no *args/**kwargs)")
        if args.posonlyargs or args.kwonlyargs:
            first = (args.posonlyargs or args.kwonlyargs)[0]
            raise self.error(first, "kernel parameters are plain: no '/' or '*' markers")
        if self.func.returns is not None and not (
            isinstance(self.func.returns, ast.Constant) and self.func.returns.value is None
        ):
            raise self.error(self.func.returns, "a kernel returns nothing: write '-> None' or omit")
        try:
            annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:  # an annotation that does not evaluate: locate which
            where: ast.AST = self.func
            for arg in args.args:
                if arg.annotation is not None:
                    try:
                        eval(ast.unparse(arg.annotation), fn.__globals__)  # noqa: S307
                    except Exception:
                        where = arg.annotation
                        break
            message = exc.args[0] if isinstance(exc, DslError) else str(exc)
            raise self.error(where, f"a kernel annotation does not evaluate: {message}") from exc
        signature = inspect.signature(fn)
        decls = []
        for arg in args.args:
            ann = annotations.get(arg.arg, _NO_DEFAULT)
            if not isinstance(
                ann, (lang.ArrayType, lang.ScalarType, lang.GenericType, lang.ConstType)
            ):
                raise self.error(
                    arg,
                    f"parameter {arg.arg!r} needs a kernel annotation: K.Array[T], a scalar type "
                    "(K.F, K.I, K.f32, K.u32, ...) or K.Const[int|float|bool]",
                )
            default = signature.parameters[arg.arg].default
            if default is not _NO_DEFAULT and not isinstance(ann, lang.ConstType):
                raise self.error(arg, f"only K.Const parameters may have a default ({arg.arg!r})")
            decls.append(ParamDecl(arg.arg, ann, default, arg.lineno + self.line_offset,
                                   arg.col_offset))
        return tuple(decls)


# ---------------------------------------------------------------- lowering


@dataclass(frozen=True)
class _Untyped:
    """A literal whose type is decided by the operand it meets (see the module docstring)."""

    value: int | float


_ExprResult = ir.Expr | _Untyped

_ARITH = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow",
}
_COMPARE = {
    ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne",
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


def _type_name(dtype: DType) -> str:
    return {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32",
            "uint32": "u32", "int64": "i64", "bool": "bool_"}[dtype.name]


def _int_range(dtype: DType) -> tuple[int, int]:
    info = np.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


def _round_float(value: float, dtype: DType) -> float:
    with np.errstate(all="ignore"):
        return float(dtype.numpy.type(value))


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class _Lowerer:
    """Type-checks one function body for fixed generics, array ranks and constants."""

    def __init__(
        self,
        parsed: ParsedKernel,
        generics: Mapping[str, DType],
        params: tuple[ir.Param, ...],
        constants: Mapping[str, Any],
    ) -> None:
        self.parsed = parsed
        self.generics = generics
        self.params = {p.name: p for p in params}
        self.constants: dict[str, _Untyped | ir.Const] = {}
        for decl in parsed.params:
            if decl.is_const:
                self.constants[decl.name] = self._constant(decl, constants[decl.name])
        self.locals: dict[str, DType] = {}
        self.loop_vars: list[str] = []
        self.written: set[str] = set()
        self.namespace = parsed.namespace()
        self.depth = 0

    # -------------------------------------------------------- helpers

    def error(self, node: ast.AST, message: str) -> DslError:
        return self.parsed.error(node, message)

    def _constant(self, decl: ParamDecl, value: Any) -> _Untyped | ir.Const:
        assert isinstance(decl.annotation, lang.ConstType)
        vt = decl.annotation.value_type
        line = decl.lineno
        if isinstance(vt, lang.ScalarType):
            return ir.Const(value, type=vt.dtype, line=line)
        if vt is bool:
            return ir.Const(bool(value), type=dtypes.bool_, line=line)
        return _Untyped(value)

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

    def materialize(self, node: ast.AST, value: _ExprResult, dtype: DType) -> ir.Expr:
        """``value`` as an expression of ``dtype``: literals adapt, typed values must match."""
        if isinstance(value, ir.Expr):
            if value.type is not dtype:
                raise self.error(
                    node,
                    f"a {_type_name(value.type)} value where {_type_name(dtype)} is needed: "
                    f"types never mix implicitly; cast with K.{_type_name(dtype)}(...)",
                )
            return value
        line = self.line(node)
        v = value.value
        if dtype is dtypes.bool_:
            raise self.error(node, f"the literal {v!r} is not a bool; write True/False or compare")
        if dtype.is_float:
            try:
                return ir.Const(_round_float(float(v), dtype), type=dtype, line=line)
            except OverflowError:
                raise self.error(node, f"the literal {v} is too large for any float type; "
                                       "write a float literal such as 1e300") from None
        if isinstance(v, float):
            raise self.error(
                node,
                f"the float literal {v!r} meets an integer ({_type_name(dtype)}) operand; cast "
                f"explicitly: K.{_type_name(dtype)}({v!r}) truncates, or cast the other operand "
                "to a float type",
            )
        lo, hi = _int_range(dtype)
        if not lo <= v <= hi:
            raise self.error(
                node,
                f"the literal {v} does not fit {_type_name(dtype)} (range {lo}..{hi}); cast the "
                "other operand to a wider or signed type",
            )
        return ir.Const(int(v), type=dtype, line=line)

    def default(self, node: ast.AST, value: _ExprResult) -> ir.Expr:
        """A value that meets no typed operand: untyped ints become i32 (signed, as in Python:
        ``k = 0; k - 1 < 0`` holds), floats f32."""
        if isinstance(value, ir.Expr):
            return value
        if isinstance(value.value, float):
            return self.materialize(node, value, dtypes.float32)
        lo, hi = _int_range(dtypes.int32)
        if not lo <= value.value <= hi:
            raise self.error(
                node,
                f"the literal {value.value} has no type here and does not fit the default i32; "
                f"write K.u32({value.value}) or K.i64({value.value})",
            )
        return self.materialize(node, value, dtypes.int32)

    def default_together(self, node: ast.AST, values: list[_ExprResult]) -> list[ir.Expr]:
        """Untyped literals that meet only each other (``K.select(c, 1, 2.5)``): one type for
        all, f32 if any is a float, else the int default."""
        if any(isinstance(v, _Untyped) and isinstance(v.value, float) for v in values):
            return [self.materialize(node, v, dtypes.float32) for v in values]
        return [self.default(node, v) for v in values]

    def unify(self, node: ast.AST, values: list[_ExprResult]) -> list[ir.Expr] | None:
        """Operands of one type, or None when all are untyped literals (caller folds)."""
        typed = [v for v in values if isinstance(v, ir.Expr)]
        if not typed:
            return None
        first = typed[0].type
        for other in typed[1:]:
            if other.type is not first:
                a, b = _type_name(first), _type_name(other.type)
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
        return name in self.locals or name in self.params or name in self.constants

    # -------------------------------------------------------- expressions

    def expr(self, node: ast.expr) -> _ExprResult:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        if self.depth >= MAX_EXPR_DEPTH:
            raise self.error(
                node,
                f"this expression nests more than {MAX_EXPR_DEPTH} operations deep; split it "
                "into locals (e.g. partial sums), which every target compiles",
            )
        self.depth += 1
        try:
            result: _ExprResult = method(node)
        finally:
            self.depth -= 1
        return result

    def typed(self, node: ast.expr) -> ir.Expr:
        return self.default(node, self.expr(node))

    def expr_Constant(self, node: ast.Constant) -> _ExprResult:
        v = node.value
        if isinstance(v, bool):
            return ir.Const(v, type=dtypes.bool_, line=self.line(node))
        if isinstance(v, (int, float)):
            return _Untyped(v)
        raise self.error(node, f"the constant {v!r} is not a number or bool: not supported")

    def expr_Name(self, node: ast.Name) -> _ExprResult:
        name = node.id
        if name in self.locals:
            return ir.Var(name, type=self.locals[name], line=self.line(node))
        if name in self.params:
            p = self.params[name]
            if p.kind == "array":
                raise self.error(
                    node,
                    f"array {name!r} is used as a value; index it ({name}[i]) or use "
                    f"{name}.len / {name}.shape[k] / {name}.stride[k]",
                )
            return ir.Var(name, type=p.dtype, line=self.line(node))
        if name in self.constants:
            return self.constants[name]
        if name in self.namespace or hasattr(builtins, name):
            return self.static_value(node, self.static(node))
        raise self.error(node, f"{name!r} is used before assignment (or is not defined)")

    def static_value(self, node: ast.expr, obj: Any) -> _ExprResult:
        if isinstance(obj, lang.ThreadIndex):
            return ir.ThreadIndex(obj.name, type=dtypes.uint32, line=self.line(node))
        if isinstance(obj, bool):
            return ir.Const(obj, type=dtypes.bool_, line=self.line(node))
        if isinstance(obj, (int, float)):
            return _Untyped(obj)
        raise self.error(
            node,
            f"{obj!r} is not a kernel value; kernels read parameters, locals, K launch indices "
            "and int/float/bool constants",
        )

    def expr_Attribute(self, node: ast.Attribute) -> _ExprResult:
        if isinstance(node.value, ast.Name) and node.value.id in self.params:
            p = self.params[node.value.id]
            if p.kind == "array" and node.attr == "len":
                return ir.ArrayLen(p.name, type=dtypes.uint32, line=self.line(node))
            if p.kind == "array" and node.attr in ("shape", "stride"):
                raise self.error(node, f"index .{node.attr} with a constant: "
                                       f"{p.name}.{node.attr}[0]")
            raise self.error(
                node,
                f"{p.name}.{node.attr} is not supported; arrays have .len, .shape[k], .stride[k]",
            )
        if isinstance(node.value, ast.Name) and self.is_runtime_name(node.value.id):
            raise self.error(node, f"scalars have no attributes ({node.value.id}.{node.attr})")
        return self.static_value(node, self.static(node))

    def expr_Subscript(self, node: ast.Subscript) -> _ExprResult:
        value = node.value
        if (
            isinstance(value, ast.Attribute)
            and value.attr in ("shape", "stride")
            and isinstance(value.value, ast.Name)
            and value.value.id in self.params
            and self.params[value.value.id].kind == "array"
        ):
            p = self.params[value.value.id]
            axis = self.axis(node.slice, p)
            cls = ir.ArrayShape if value.attr == "shape" else ir.ArrayStride
            return cls(p.name, axis, type=dtypes.uint32, line=self.line(node))
        array = self.array_param(value)
        index = self.index(node.slice)
        return ir.Load(array.name, index, type=array.dtype, line=self.line(node))

    def axis(self, node: ast.expr, p: ir.Param) -> int:
        k = self.expr(node)
        if not isinstance(k, _Untyped) or not isinstance(k.value, int):
            raise self.error(node, "the axis of .shape[k]/.stride[k] must be a compile-time int "
                                   "(a literal or a K.Const[int] parameter)")
        assert p.ndim is not None
        axis = k.value + p.ndim if k.value < 0 else k.value
        if not 0 <= axis < p.ndim:
            raise self.error(node, f"axis {k.value} is out of range for {p.name!r}, which has "
                                   f"{p.ndim} dimension(s) in this specialization")
        return axis

    def array_param(self, node: ast.expr) -> ir.Param:
        if isinstance(node, ast.Name) and node.id in self.params:
            p = self.params[node.id]
            if p.kind == "array":
                return p
            raise self.error(node, f"{node.id!r} is a scalar parameter and cannot be indexed")
        raise self.error(node, "only array parameters can be indexed")

    def index(self, node: ast.expr) -> ir.Expr:
        if isinstance(node, (ast.Tuple, ast.Slice)):
            raise self.error(
                node,
                "arrays take one linear index relative to the view's offset, e.g. "
                "a[i * a.stride[0] + j * a.stride[1]]; slices and tuples are not supported",
            )
        idx = self.typed(node)
        if not idx.type.is_integer:
            raise self.error(node, f"an array index must be an integer, not "
                                   f"{_type_name(idx.type)}; cast with K.u32(...)")
        return idx

    def expr_UnaryOp(self, node: ast.UnaryOp) -> _ExprResult:
        operand = self.expr(node.operand)
        line = self.line(node)
        if isinstance(node.op, ast.Not):
            if not isinstance(operand, ir.Expr) or operand.type is not dtypes.bool_:
                raise self.error(node, "'not' needs a bool; compare explicitly (x != 0)")
            return ir.Unary("not", operand, type=dtypes.bool_, line=line)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            if isinstance(operand, _Untyped):
                return _Untyped(-operand.value if isinstance(node.op, ast.USub) else operand.value)
            if operand.type is dtypes.bool_:
                raise self.error(node, "unary +/- needs a number, not a bool; cast with K.i32(b)")
            if isinstance(node.op, ast.UAdd):
                return operand
            return ir.Unary("neg", operand, type=operand.type, line=line)
        raise self.error(node, "'~' is not supported in kernels")

    def expr_BinOp(self, node: ast.BinOp) -> _ExprResult:
        op = _ARITH.get(type(node.op))
        if op is None:
            raise self.error(node, f"the operator {type(node.op).__name__} is not supported; "
                                   "kernels have + - * / // % **")
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        return self.arith(node, op, lhs, rhs)

    def arith(self, node: ast.AST, op: str, lhs: _ExprResult, rhs: _ExprResult) -> _ExprResult:
        operands = self.unify(node, [lhs, rhs])
        if operands is None:
            assert isinstance(lhs, _Untyped) and isinstance(rhs, _Untyped)
            return self.fold(node, op, lhs.value, rhs.value)
        a, b = operands
        t = a.type
        if t is dtypes.bool_:
            raise self.error(node, "arithmetic on bools is not supported; cast with K.i32(b)")
        if op == "div" and not t.is_float:
            raise self.error(
                node,
                f"'/' on integers ({_type_name(t)}) is not supported: use '//' (truncates toward "
                "zero) or cast to a float type first",
            )
        if op == "pow" and not t.is_float:
            raise self.error(node, f"'**' needs floats, not {_type_name(t)}; multiply, or cast "
                                   "to a float type")
        if op in ("floordiv", "mod") and not t.is_float and isinstance(b, ir.Const) \
                and b.value == 0:
            raise self.error(node, "integer division or remainder by the constant zero; guard "
                                   "the divisor or use a float type")
        return ir.Binary(op, a, b, type=t, line=self.line(node))

    def fold(self, node: ast.AST, op: str, a: float, b: float) -> _Untyped:
        """Two untyped literals: computed now, with the DSL's (C) semantics."""
        if op in ("div", "floordiv", "mod") and b == 0:
            raise self.error(node, "division by zero in a constant expression")
        if isinstance(a, int) and isinstance(b, int):
            if op == "div":
                raise self.error(node, "'/' on integer literals is not supported: use '//' "
                                       "(truncates toward zero) or write float literals")
            if op == "pow":
                raise self.error(node, "'**' on integer literals is not supported; write the "
                                       "value or use float literals")
            if op == "floordiv":
                return _Untyped(_trunc_div(a, b))
            if op == "mod":
                return _Untyped(a - b * _trunc_div(a, b))
        table: dict[str, Callable[[], float]] = {
            "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "div": lambda: float(a) / float(b),
            "floordiv": lambda: float(math.trunc(float(a) / float(b))),
            "mod": lambda: math.fmod(float(a), float(b)), "pow": lambda: math.pow(a, b),
        }
        try:
            return _Untyped(table[op]())
        except (OverflowError, ValueError) as exc:
            raise self.error(
                node,
                f"the constant expression {ast.unparse(node) if isinstance(node, ast.expr) else op}"
                f" has no finite real value ({exc}); write the intended value, or make one "
                "operand typed (e.g. K.f32(...)) to compute it at run time with IEEE rules",
            ) from None

    def expr_Compare(self, node: ast.Compare) -> _ExprResult:
        operands = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        comparisons: list[ir.Expr] = []
        for k, op_node in enumerate(node.ops):
            op = _COMPARE.get(type(op_node))
            if op is None:
                raise self.error(node, f"'{type(op_node).__name__}' comparisons are not supported;"
                                       " use < <= > >= == !=")
            comparisons.append(self.compare(node, op, operands[k], operands[k + 1]))
        return self.balanced("and", comparisons, self.line(node))

    def compare(self, node: ast.AST, op: str, lhs: _ExprResult, rhs: _ExprResult) -> ir.Expr:
        line = self.line(node)
        operands = self.unify(node, [lhs, rhs])
        if operands is None:
            assert isinstance(lhs, _Untyped) and isinstance(rhs, _Untyped)
            value = {"lt": lhs.value < rhs.value, "le": lhs.value <= rhs.value,
                     "gt": lhs.value > rhs.value, "ge": lhs.value >= rhs.value,
                     "eq": lhs.value == rhs.value, "ne": lhs.value != rhs.value}[op]
            return ir.Const(value, type=dtypes.bool_, line=line)
        a, b = operands
        if a.type is dtypes.bool_ and op not in ("eq", "ne"):
            raise self.error(node, "bools compare only with == and !=")
        return ir.Compare(op, a, b, type=dtypes.bool_, line=line)

    def condition(self, node: ast.expr, what: str) -> ir.Expr:
        value = self.expr(node)
        if not isinstance(value, ir.Expr) or value.type is not dtypes.bool_:
            raise self.error(node, f"{what} needs a bool; compare explicitly (e.g. x != 0)")
        return value

    def expr_BoolOp(self, node: ast.BoolOp) -> _ExprResult:
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.condition(v, f"'{op}'") for v in node.values]
        return self.balanced(op, values, self.line(node))

    def balanced(self, op: str, values: list[ir.Expr], line: int) -> ir.Expr:
        """``v0 op v1 op ...`` as a balanced tree: the same short-circuit order and result
        (and/or are associative), log2(n) deep instead of n."""
        if len(values) == 1:
            return values[0]
        half = len(values) // 2
        return ir.Logical(op, self.balanced(op, values[:half], line),
                          self.balanced(op, values[half:], line), type=dtypes.bool_, line=line)

    def expr_Call(self, node: ast.Call) -> _ExprResult:
        if isinstance(node.func, ast.Name) and self.is_runtime_name(node.func.id):
            raise self.error(node, f"{node.func.id!r} is not callable")
        fn = self.static(node.func)
        if node.keywords:
            raise self.error(node, "kernel functions take positional arguments only")
        if isinstance(fn, (lang.ScalarType, lang.GenericType)):
            if len(node.args) != 1:
                raise self.error(node, f"the cast {fn!r}(x) takes exactly one argument")
            return self.cast(node, self.resolve_type(node, fn), self.expr(node.args[0]))
        if isinstance(fn, lang.Intrinsic):
            if len(node.args) != fn.arity:
                raise self.error(node, f"K.{fn.name} takes {fn.arity} argument(s), "
                                       f"got {len(node.args)}")
            return self.intrinsic(node, fn.name, [self.expr(a) for a in node.args])
        if fn is range:
            raise self.error(node, "range(...) is only supported as 'for i in range(...)'")
        if fn in (int, float, bool):
            raise self.error(node, f"{fn.__name__}(...) is not supported; cast with K.I(x), "
                                   "K.F(x), K.u32(x), K.f32(x), K.bool_(x) ...")
        raise self.error(
            node,
            f"calling {ast.unparse(node.func)} is not supported in kernels; kernels call only "
            "K math functions (K.sqrt ...), K.select and casts (K.f32(x), K.F(x) ...)",
        )

    def cast(self, node: ast.AST, dtype: DType, value: _ExprResult) -> ir.Expr:
        line = self.line(node)
        if isinstance(value, _Untyped):
            v = value.value
            if dtype is dtypes.bool_:
                return ir.Const(v != 0, type=dtype, line=line)
            if dtype.is_float:
                return ir.Const(_round_float(float(v), dtype), type=dtype, line=line)
            if isinstance(v, float):  # the run-time rule: truncate, saturate, NaN -> 0
                lo, hi = _int_range(dtype)
                v = 0 if math.isnan(v) else max(lo, min(hi, math.trunc(v))) if math.isfinite(
                    v) else (hi if v > 0 else lo)
            return self.materialize(node, _Untyped(v), dtype)
        if value.type is dtype:
            return value
        return ir.Cast(value, type=dtype, line=line)

    def intrinsic(self, node: ast.AST, name: str, args: list[_ExprResult]) -> ir.Expr:
        line = self.line(node)
        if name == "select":
            cond = args[0]
            if not isinstance(cond, ir.Expr) or cond.type is not dtypes.bool_:
                raise self.error(node, "K.select(cond, a, b) needs a bool cond; compare "
                                       "explicitly")
            branches = self.unify(node, args[1:]) or self.default_together(node, args[1:])
            return ir.Select(cond, branches[0], branches[1], type=branches[0].type, line=line)
        operands = self.unify(node, args) or self.default_together(node, args)
        t = operands[0].type
        if t is dtypes.bool_:
            raise self.error(node, f"K.{name} needs numbers, not bools")
        if name == "abs" and t.category == "uint":
            return operands[0]
        if name not in ("min", "max", "abs") and not t.is_float:
            raise self.error(node, f"K.{name} needs a float argument, not {_type_name(t)}; cast "
                                   "with K.F(x) or K.f32(x)")
        return ir.Math(name, tuple(operands), type=t, line=line)

    # -------------------------------------------------------- statements

    def block(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for stmt in stmts:
            method = getattr(self, "stmt_" + type(stmt).__name__, None)
            if method is None:
                raise self.unsupported(stmt)
            out.extend(method(stmt))
        return tuple(out)

    def stmt_Pass(self, node: ast.Pass) -> list[ir.Stmt]:
        return []

    def stmt_Expr(self, node: ast.Expr) -> list[ir.Stmt]:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # docstring or comment string
        if isinstance(node.value, ast.Call):
            self.expr(node.value)  # a call of anything but a K function: says calling it fails
        raise self.error(node, "an expression statement has no effect in a kernel; assign it to "
                               "a local or store it into an array")

    def stmt_Return(self, node: ast.Return) -> list[ir.Stmt]:
        if node.value is not None:
            raise self.error(node, "kernels return nothing; write results into an output array "
                                   "and use a bare 'return'")
        return [ir.Return(line=self.line(node))]

    def stmt_Break(self, node: ast.Break) -> list[ir.Stmt]:
        return [ir.Break(line=self.line(node))]

    def stmt_Continue(self, node: ast.Continue) -> list[ir.Stmt]:
        return [ir.Continue(line=self.line(node))]

    def assign_local(self, node: ast.AST, name: str, value: _ExprResult, value_node: ast.AST,
                     declared: DType | None = None) -> ir.Stmt:
        if name in self.params:
            raise self.error(node, f"parameter {name!r} is read-only; copy it into a local "
                                   "(or store into an array element)")
        if name in self.constants:
            raise self.error(node, f"constant {name!r} is read-only")
        if name in self.loop_vars:
            raise self.error(node, f"the loop variable {name!r} cannot be assigned inside its "
                                   "loop; use another local")
        known = self.locals.get(name)
        if declared is not None and known is not None and known is not declared:
            raise self.error(node, f"local {name!r} already has type {_type_name(known)}")
        target = declared or known
        typed = self.default(value_node, value) if target is None else None
        if target is not None:
            if isinstance(value, ir.Expr) and value.type is not target:
                raise self.error(
                    node,
                    f"local {name!r} has type {_type_name(target)} (a local keeps its first "
                    f"type) but is assigned a {_type_name(value.type)}; cast with "
                    f"K.{_type_name(target)}(...) or use another local",
                )
            typed = self.materialize(value_node, value, target)
        assert typed is not None
        self.locals.setdefault(name, typed.type)
        return ir.Assign(name, typed, line=self.line(node))

    def store(self, node: ast.Subscript, value: _ExprResult, value_node: ast.AST) -> ir.Stmt:
        array = self.array_param(node.value)
        index = self.index(node.slice)
        if isinstance(value, ir.Expr) and value.type is not array.dtype:
            raise self.error(
                node,
                f"storing a {_type_name(value.type)} into {array.name!r} whose elements are "
                f"{_type_name(array.dtype)}; cast with K.{_type_name(array.dtype)}(...)",
            )
        self.written.add(array.name)
        return ir.Store(array.name, index, self.materialize(value_node, value, array.dtype),
                        line=self.line(node))

    def stmt_Assign(self, node: ast.Assign) -> list[ir.Stmt]:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = x) is not supported")
        return [self.assign_to(node.targets[0], self.expr(node.value), node.value)]

    def assign_to(self, target: ast.expr, value: _ExprResult, value_node: ast.AST) -> ir.Stmt:
        if isinstance(target, ast.Name):
            return self.assign_local(target, target.id, value, value_node)
        if isinstance(target, ast.Subscript):
            return self.store(target, value, value_node)
        if isinstance(target, (ast.Tuple, ast.List)):
            raise self.error(target, "tuple unpacking is not supported; assign one name per line")
        raise self.error(target, "only locals and array elements (a[i]) can be assigned")

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> list[ir.Stmt]:
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise self.error(node, "annotated assignment is 'name: K.f32 = value'")
        dtype = self.resolve_type(node.annotation, self.static(node.annotation))
        value = self.expr(node.value)
        return [self.assign_local(node, node.target.id, value, node.value, declared=dtype)]

    def stmt_AugAssign(self, node: ast.AugAssign) -> list[ir.Stmt]:
        op = _ARITH.get(type(node.op))
        if op is None or op == "pow":
            raise self.error(node, "augmented assignment supports += -= *= /= //= %=")
        target = node.target
        if not isinstance(target, (ast.Name, ast.Subscript)):
            raise self.error(node, "only locals and array elements (a[i]) can be updated")
        load = ast.copy_location(
            ast.Name(target.id, ast.Load()) if isinstance(target, ast.Name)
            else ast.Subscript(target.value, target.slice, ast.Load()),
            target,
        )
        value = self.arith(node, op, self.expr(load), self.expr(node.value))
        return [self.assign_to(target, value, node)]

    def stmt_If(self, node: ast.If) -> list[ir.Stmt]:
        cond = self.condition(node.test, "'if'")
        return [ir.If(cond, self.block(node.body), self.block(node.orelse),
                      line=self.line(node))]

    def stmt_While(self, node: ast.While) -> list[ir.Stmt]:
        if node.orelse:
            raise self.error(node, "'while ... else' is not supported")
        cond = self.condition(node.test, "'while'")
        return [ir.While(cond, self.block(node.body), line=self.line(node))]

    def stmt_For(self, node: ast.For) -> list[ir.Stmt]:
        if node.orelse:
            raise self.error(node, "'for ... else' is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop target must be one name: for i in range(n)")
        it = node.iter
        if not (isinstance(it, ast.Call) and not isinstance(it.func, ast.Attribute)
                and isinstance(it.func, ast.Name) and not self.is_runtime_name(it.func.id)
                and self.static(it.func) is range):
            raise self.error(it, "kernels loop only over range(...): for i in range(a, b, c)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(it, "range takes 1 to 3 positional arguments")
        args = [self.expr(a) for a in it.args]
        for arg, arg_node in zip(args, it.args, strict=True):
            if isinstance(arg, _Untyped) and isinstance(arg.value, float):
                raise self.error(arg_node, f"range needs integers, not the float {arg.value!r}; "
                                           "write an int, or cast: K.i32(...) truncates")
        if len(args) == 1:
            args = [_Untyped(0), args[0]]
        if len(args) == 2:
            args.append(_Untyped(1))
        name = node.target.id
        if name in self.params or name in self.constants:
            raise self.error(node.target, f"the loop variable {name!r} shadows a parameter")
        if name in self.loop_vars:
            raise self.error(node.target, f"the loop variable {name!r} is already used by an "
                                          "enclosing loop")
        known = self.locals.get(name)
        if known is not None:
            typed = [self.materialize(it, a, known) for a in args]
        else:
            typed = self.unify(it, args) or [self.default(it, a) for a in args]
        start, stop, step = typed
        if not start.type.is_integer:
            raise self.error(it, f"range needs integers, not {_type_name(start.type)}")
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(it.args[2], "range step must not be zero")
        self.locals.setdefault(name, start.type)
        self.loop_vars.append(name)
        try:
            body = self.block(node.body)
        finally:
            self.loop_vars.pop()
        return [ir.For(name, start, stop, step, body, line=self.line(node))]


def lower(
    parsed: ParsedKernel,
    generics: Mapping[str, DType],
    params: tuple[ir.Param, ...],
    constants: Mapping[str, Any],
) -> ir.KernelIR:
    """Type-check ``parsed``'s body for the given resolved parameters and constants."""
    lowerer = _Lowerer(parsed, generics, params, constants)
    body = lowerer.block(parsed.func.body)
    return ir.KernelIR(
        name=parsed.name,
        filename=parsed.filename,
        params=params,
        locals=tuple(lowerer.locals.items()),
        body=body,
        written=frozenset(lowerer.written),
    )

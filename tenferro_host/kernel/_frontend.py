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
import copy
import functools
import inspect
import math
import re
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import DslError
from . import ir, lang
from .ir import U32_MAX

MAX_EXPR_DEPTH = 100
"""Deepest expression nesting a kernel may use: generated code and the targets' own compilers
recurse over expressions, and a 500-term ``a + b + ...`` is 500 levels deep."""

_NO_DEFAULT = inspect.Parameter.empty

_ATOMICS = {"atomic_" + op: op for op in ir.ATOMIC_OPS}
_ATOMIC_TYPES = ("int32", "uint32", "float32", "int64", "float64")
_RESERVED = re.compile(r"tf\d+_")


@dataclass(frozen=True)
class ParamDecl:
    """One declared parameter: its annotation (None: an unannotated device-function parameter,
    typed from its call site) and where it is written."""

    name: str
    annotation: lang.ArrayType | lang.ScalarType | lang.GenericType | lang.ConstType | None
    default: Any
    lineno: int
    col_offset: int

    @property
    def is_const(self) -> bool:
        return isinstance(self.annotation, lang.ConstType)


class ParsedKernel:
    """A kernel function's parsed source, checked signature and name-resolution namespace."""

    kind = "kernel"

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
            raise DslError(f"@K.{self.kind} decorates a function defined with def, not {fn!r}")
        code = fn.__code__
        self.name = fn.__name__
        self.filename = code.co_filename
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise DslError(
                f"the source of {self.kind} {fn.__name__!r} is not available: {self.kind} source "
                "must live in a file (not an interactive session, exec or eval); move it into a "
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
            raise self.error(node, f"@K.{self.kind} decorates a plain def function (not async)")
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
            decls.append(
                ParamDecl(arg.arg, ann, default, arg.lineno + self.line_offset, arg.col_offset)
            )
        return tuple(decls)


class ParsedFunction(ParsedKernel):
    """A ``@K.func`` device function: parameters are optionally annotated (``K.Array[T]``, a
    scalar type, ``K.F``/``K.I``; unannotated ones take their call site's type) and it may
    ``return`` a value. It is inlined into each kernel that calls it."""

    kind = "func"

    def _check_signature(self, fn: Callable[..., Any]) -> tuple[ParamDecl, ...]:
        args = self.func.args
        if args.vararg or args.kwarg or args.posonlyargs or args.kwonlyargs or args.defaults:
            raise self.error(
                self.func,
                "device functions take plain positional parameters "
                "(no defaults, *args, **kwargs, '/' or '*')",
            )
        try:
            annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:
            raise self.error(
                self.func, f"an annotation of {self.name!r} does not evaluate: {exc}"
            ) from exc
        decls = []
        for arg in args.args:
            ann = annotations.get(arg.arg)
            if ann is not None and not isinstance(
                ann, (lang.ArrayType, lang.ScalarType, lang.GenericType)
            ):
                raise self.error(
                    arg,
                    f"parameter {arg.arg!r} of device function {self.name!r}: "
                    "annotate with K.Array[T], a scalar type (K.F, K.f32 ...) "
                    "or nothing (typed from the call site)",
                )
            decls.append(
                ParamDecl(arg.arg, ann, _NO_DEFAULT, arg.lineno + self.line_offset, arg.col_offset)
            )
        return tuple(decls)


class DeviceFunction:
    """What ``@K.func`` returns: a helper that kernels and other device functions call; Python
    never runs its body."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.parsed = ParsedFunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DslError(
            f"device function {self.parsed.name!r} runs only inside kernels; call it "
            "from a @K.kernel body"
        )

    def __repr__(self) -> str:
        return f"<K.func {self.parsed.name} ({self.parsed.filename}:{self.parsed.func.lineno})>"


# ---------------------------------------------------------------- lowering


@dataclass(frozen=True)
class _ArrayRef:
    """An array visible under some name: IR name, element type, ``ndim`` for a parameter, or
    ``size`` for a shared array."""

    name: str
    dtype: DType
    ndim: int
    shared_size: int | None = None


@dataclass
class _Frame:
    """An inlined device function call: where its result goes and how it returns early."""

    func: DeviceFunction
    result: str | None = None
    result_type: DType | None = None
    done: str | None = None  # set when returns need the one-trip loop wrapper


@dataclass(frozen=True)
class _Untyped:
    """A literal whose type is decided by the operand it meets (see the module docstring)."""

    value: int | float


_ExprResult = ir.Expr | _Untyped

_ARITH = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
}
_COMPARE = {
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


def _type_name(dtype: DType) -> str:
    return _TYPE_NAMES[dtype.name]


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
        self.arrays = {
            p.name: _ArrayRef(p.name, p.dtype, p.ndim or 0) for p in params if p.kind == "array"
        }
        self.locals: dict[str, DType] = {}  # Python name -> type, in this frame
        self.decls: dict[str, DType] = {}  # IR name -> type, every frame of the kernel
        self.prefix = ""  # IR name = prefix + Python name
        self.loop_vars: list[str] = []
        self.written: set[str] = set()
        self.atomic: set[str] = set()
        self.shared: list[ir.SharedArray] = []
        self.namespace = parsed.namespace()
        self.depth = 0
        self.pending: list[ir.Stmt] = []  # inlined calls of the statement being lowered
        self.frame: _Frame | None = None
        self.calls: tuple[DeviceFunction, ...] = ()
        self.inlined = [0]  # shared counter for unique prefixes
        self.no_call_reason: str | None = None
        self.top_level: set[int] = set()  # ids of the kernel body's top-level statements

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
                raise self.error(
                    node,
                    f"the literal {v} is too large for any float type; "
                    "write a float literal such as 1e300",
                ) from None
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
        return (
            name in self.locals
            or name in self.params
            or name in self.constants
            or name in self.arrays
        )

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
            return ir.Var(self.prefix + name, type=self.locals[name], line=self.line(node))
        if name in self.arrays:
            raise self.error(
                node,
                f"array {name!r} is used as a value; index it ({name}[i]) or use "
                f"{name}.len / {name}.shape[k] / {name}.stride[k]",
            )
        if name in self.params:
            return ir.Var(name, type=self.params[name].dtype, line=self.line(node))
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
        if isinstance(node.value, ast.Name) and node.value.id in self.arrays:
            a = self.arrays[node.value.id]
            if node.attr == "len":
                if a.shared_size is not None:
                    return ir.Const(a.shared_size, type=dtypes.uint32, line=self.line(node))
                return ir.ArrayLen(a.name, type=dtypes.uint32, line=self.line(node))
            if node.attr in ("shape", "stride"):
                raise self.error(
                    node, f"index .{node.attr} with a constant: {node.value.id}.{node.attr}[0]"
                )
            raise self.error(
                node,
                f"{node.value.id}.{node.attr} is not supported; arrays have .len, .shape[k], "
                ".stride[k]",
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
            and value.value.id in self.arrays
        ):
            a = self.arrays[value.value.id]
            axis = self.axis(node.slice, a)
            if a.shared_size is not None:
                size = a.shared_size if value.attr == "shape" else 1
                return ir.Const(size, type=dtypes.uint32, line=self.line(node))
            cls = ir.ArrayShape if value.attr == "shape" else ir.ArrayStride
            return cls(a.name, axis, type=dtypes.uint32, line=self.line(node))
        array = self.array_param(value)
        index = self.index(node.slice, array)
        return ir.Load(array.name, index, type=array.dtype, line=self.line(node))

    def axis(self, node: ast.expr, p: _ArrayRef) -> int:
        k = self.expr(node)
        if not isinstance(k, _Untyped) or not isinstance(k.value, int):
            raise self.error(
                node,
                "the axis of .shape[k]/.stride[k] must be a compile-time int "
                "(a literal or a K.Const[int] parameter)",
            )
        axis = k.value + p.ndim if k.value < 0 else k.value
        if not 0 <= axis < p.ndim:
            raise self.error(
                node,
                f"axis {k.value} is out of range for {p.name!r}, which has "
                f"{p.ndim} dimension(s) in this specialization",
            )
        return axis

    def array_param(self, node: ast.expr) -> _ArrayRef:
        if isinstance(node, ast.Name) and node.id in self.arrays:
            return self.arrays[node.id]
        if isinstance(node, ast.Name) and self.is_runtime_name(node.id):
            raise self.error(node, f"{node.id!r} is a scalar and cannot be indexed")
        raise self.error(node, "only array parameters and shared arrays can be indexed")

    def index(self, node: ast.expr, array: _ArrayRef) -> ir.Expr:
        """A linear index relative to the view's offset: ``a[k]`` as written, ``a[i, j]``
        (one index per dimension) as ``i * a.stride[0] + j * a.stride[1]`` in u32."""
        if isinstance(node, ast.Slice):
            raise self.error(node, "slices are not supported; index with a[i] or a[i, j]")
        if not isinstance(node, ast.Tuple):
            return self.integer_index(node)
        if array.shared_size is not None or len(node.elts) != array.ndim:
            what = (
                "a shared array takes one index"
                if array.shared_size is not None
                else f"{array.name!r} has {array.ndim} dimension(s) in this specialization"
            )
            raise self.error(
                node,
                f"{len(node.elts)} indices given but {what}; index with one "
                "per dimension, or one linear index a[k]",
            )
        u32 = dtypes.uint32
        line = self.line(node)
        total: ir.Expr | None = None
        for axis, elt in enumerate(node.elts):
            k = self.integer_index(elt)
            if k.type is not u32:
                k = ir.Cast(k, type=u32, line=line)
            term = ir.Binary(
                "mul", k, ir.ArrayStride(array.name, axis, type=u32, line=line), type=u32, line=line
            )
            total = term if total is None else ir.Binary("add", total, term, type=u32, line=line)
        assert total is not None
        return total

    def integer_index(self, node: ast.expr) -> ir.Expr:
        if isinstance(node, (ast.Tuple, ast.Slice)):
            raise self.error(node, "an index is one integer expression")
        idx = self.typed(node)
        if not idx.type.is_integer:
            raise self.error(
                node,
                f"an array index must be an integer, not "
                f"{_type_name(idx.type)}; cast with K.u32(...)",
            )
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
            raise self.error(
                node,
                f"the operator {type(node.op).__name__} is not supported; "
                "kernels have + - * / // % **",
            )
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
            raise self.error(
                node, f"'**' needs floats, not {_type_name(t)}; multiply, or cast to a float type"
            )
        if (
            op in ("floordiv", "mod")
            and not t.is_float
            and isinstance(b, ir.Const)
            and b.value == 0
        ):
            raise self.error(
                node,
                "integer division or remainder by the constant zero; guard "
                "the divisor or use a float type",
            )
        return ir.Binary(op, a, b, type=t, line=self.line(node))

    def fold(self, node: ast.AST, op: str, a: float, b: float) -> _Untyped:
        """Two untyped literals: computed now, with the DSL's (C) semantics."""
        if op in ("div", "floordiv", "mod") and b == 0:
            raise self.error(node, "division by zero in a constant expression")
        if isinstance(a, int) and isinstance(b, int):
            if op == "div":
                raise self.error(
                    node,
                    "'/' on integer literals is not supported: use '//' "
                    "(truncates toward zero) or write float literals",
                )
            if op == "pow":
                raise self.error(
                    node,
                    "'**' on integer literals is not supported; write the "
                    "value or use float literals",
                )
            if op == "floordiv":
                return _Untyped(_trunc_div(a, b))
            if op == "mod":
                return _Untyped(a - b * _trunc_div(a, b))
        table: dict[str, Callable[[], float]] = {
            "add": lambda: a + b,
            "sub": lambda: a - b,
            "mul": lambda: a * b,
            "div": lambda: float(a) / float(b),
            "floordiv": lambda: float(math.trunc(float(a) / float(b))),
            "mod": lambda: math.fmod(float(a), float(b)),
            "pow": lambda: math.pow(a, b),
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
                raise self.error(
                    node,
                    f"'{type(op_node).__name__}' comparisons are not supported;"
                    " use < <= > >= == !=",
                )
            comparisons.append(self.compare(node, op, operands[k], operands[k + 1]))
        return self.balanced("and", comparisons, self.line(node))

    def compare(self, node: ast.AST, op: str, lhs: _ExprResult, rhs: _ExprResult) -> ir.Expr:
        line = self.line(node)
        operands = self.unify(node, [lhs, rhs])
        if operands is None:
            assert isinstance(lhs, _Untyped) and isinstance(rhs, _Untyped)
            value = {
                "lt": lhs.value < rhs.value,
                "le": lhs.value <= rhs.value,
                "gt": lhs.value > rhs.value,
                "ge": lhs.value >= rhs.value,
                "eq": lhs.value == rhs.value,
                "ne": lhs.value != rhs.value,
            }[op]
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
        values = [self.condition(node.values[0], f"'{op}'")]
        outer, self.no_call_reason = (
            self.no_call_reason,
            (f"in the right operand of '{op}' (it is evaluated only where it decides)"),
        )
        try:
            values += [self.condition(v, f"'{op}'") for v in node.values[1:]]
        finally:
            self.no_call_reason = outer
        return self.balanced(op, values, self.line(node))

    def balanced(self, op: str, values: list[ir.Expr], line: int) -> ir.Expr:
        """``v0 op v1 op ...`` as a balanced tree: the same short-circuit order and result
        (and/or are associative), log2(n) deep instead of n."""
        if len(values) == 1:
            return values[0]
        half = len(values) // 2
        return ir.Logical(
            op,
            self.balanced(op, values[:half], line),
            self.balanced(op, values[half:], line),
            type=dtypes.bool_,
            line=line,
        )

    def expr_Call(self, node: ast.Call) -> _ExprResult:  # noqa: C901 - one branch per callee kind
        if isinstance(node.func, ast.Name) and self.is_runtime_name(node.func.id):
            raise self.error(node, f"{node.func.id!r} is not callable")
        fn = self.static(node.func)
        if node.keywords:
            raise self.error(node, "kernel functions take positional arguments only")
        if isinstance(fn, (lang.ScalarType, lang.GenericType)):
            if len(node.args) != 1:
                raise self.error(node, f"the cast {fn!r}(x) takes exactly one argument")
            return self.cast(node, self.resolve_type(node, fn), self.expr(node.args[0]))
        if isinstance(fn, DeviceFunction):
            result = self.call_function(node, fn)
            if result is None:
                raise self.error(
                    node,
                    f"device function {fn.parsed.name!r} returns no value; call it as a statement",
                )
            return result
        if isinstance(fn, lang.Intrinsic):
            if len(node.args) != fn.arity:
                raise self.error(
                    node, f"K.{fn.name} takes {fn.arity} argument(s), got {len(node.args)}"
                )
            if fn.name in _ATOMICS:
                return self.atomic_call(node, _ATOMICS[fn.name])
            if fn.name == "shared":
                raise self.error(
                    node,
                    "K.shared(T, size) declares a cube's shared array: write "
                    "'name = K.shared(K.f32, 256)' at the top level of the "
                    "kernel body",
                )
            if fn.name == "sync_cube":
                raise self.error(node, "K.sync_cube() is a statement of its own; it has no value")
            return self.intrinsic(node, fn.name, [self.expr(a) for a in node.args])
        if fn is range:
            raise self.error(node, "range(...) is only supported as 'for i in range(...)'")
        if fn in (int, float, bool):
            raise self.error(
                node,
                f"{fn.__name__}(...) is not supported; cast with K.I(x), "
                "K.F(x), K.u32(x), K.f32(x), K.bool_(x) ...",
            )
        raise self.error(
            node,
            f"calling {ast.unparse(node.func)} is not supported in kernels; kernels call only "
            "K functions (K.sqrt, K.atomic_add ...), casts (K.f32(x), K.F(x) ...) and @K.func "
            "device functions",
        )

    # -------------------------------------------------------- cooperation

    def atomic_call(self, node: ast.Call, op: str) -> ir.Atomic:
        """``K.atomic_<op>(a, index, [compare,] value)``: the element's old value."""
        array = self.array_param(node.args[0])
        if array.dtype.name not in _ATOMIC_TYPES:
            raise self.error(
                node,
                f"atomics need i32, u32 or f32 elements (i64 and f64 on cuda "
                f"and cpu), not {_type_name(array.dtype)}",
            )
        index = self.index(node.args[1], array)
        operands = [self.materialize(a, self.expr(a), array.dtype) for a in node.args[2:]]
        if array.shared_size is None:
            self.written.add(array.name)
        self.atomic.add(array.name)
        compare = operands[0] if op == "compare_exchange" else None
        return ir.Atomic(
            op, array.name, index, operands[-1], compare, type=array.dtype, line=self.line(node)
        )

    def shared_decl(self, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
        """``name = K.shared(T, size)`` at the kernel's top level."""
        target = node.targets[0]
        if self.frame is not None:
            raise self.error(
                node,
                "declare shared arrays in the kernel and pass them to the "
                "device function as arguments",
            )
        if id(node) not in self.top_level:
            raise self.error(
                node,
                "K.shared(...) declares a cube's shared array once: write it "
                "at the top level of the kernel body, not inside if/for/while",
            )
        if not isinstance(target, ast.Name):
            raise self.error(node, "assign a shared array to one name: s = K.shared(K.f32, 256)")
        if len(call.args) != 2 or call.keywords:
            raise self.error(call, "K.shared takes (element type, size): K.shared(K.f32, 256)")
        name = target.id
        if self.is_runtime_name(name):
            raise self.error(
                target,
                f"{name!r} is already a parameter, local or shared array; "
                "give the shared array its own name",
            )
        dtype = self.resolve_type(call.args[0], self.static(call.args[0]))
        if dtype is dtypes.bool_:
            raise self.error(
                call.args[0],
                "shared arrays of bool are not supported; store 0/1 in a K.u32 shared array",
            )
        size = self.expr(call.args[1])
        value = size.value if isinstance(size, (_Untyped, ir.Const)) else None
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= U32_MAX:
            raise self.error(
                call.args[1],
                "the size of a shared array is a positive compile-time "
                "int (a literal, a K.Const[int] or a module constant)",
            )
        decl = ir.SharedArray(name, dtype, value, line=self.line(node))
        self.shared.append(decl)
        self.arrays[name] = _ArrayRef(name, dtype, 1, value)
        return []

    # -------------------------------------------------------- device functions

    def call_function(  # noqa: C901 - each refusal of an inlined call, then the inlining
        self, node: ast.Call, fn: DeviceFunction
    ) -> ir.Var | None:
        """Inline ``fn`` at this call: its statements go to ``pending`` (ahead of the statement
        being lowered), its result is a fresh local (None when it returns no value)."""
        parsed = fn.parsed
        if self.no_call_reason is not None:
            raise self.error(
                node,
                f"device functions cannot be called {self.no_call_reason}; "
                "assign the call's result to a local first",
            )
        if fn in self.calls:
            chain = " -> ".join(f.parsed.name for f in (*self.calls, fn))
            raise self.error(
                node,
                f"device function {parsed.name!r} calls itself ({chain}): "
                "recursion is not supported; write a loop",
            )
        if node.keywords or len(node.args) != len(parsed.params):
            raise self.error(
                node,
                f"device function {parsed.name!r} takes "
                f"{len(parsed.params)} positional argument(s), got "
                f"{len(node.args)}",
            )
        self.inlined[0] += 1
        child = copy.copy(self)
        child.parsed, child.namespace, child.prefix = (
            parsed,
            parsed.namespace(),
            f"tf{self.inlined[0]}_",
        )
        child.params, child.constants, child.arrays, child.locals = {}, {}, {}, {}
        child.loop_vars, child.pending, child.top_level = [], [], set()
        child.calls = (*self.calls, fn)
        generics: dict[str, DType] = {}

        def bind(generic: lang.GenericType, dtype: DType, where: ast.AST) -> None:
            have = generics.setdefault(generic.name, dtype)
            if not generic.accepts(dtype) or have is not dtype:
                raise self.error(
                    where,
                    f"K.{generic.name} of {parsed.name!r} is "
                    f"{_type_name(have)} here but this argument is "
                    f"{_type_name(dtype)}",
                )

        scalars: list[tuple[ParamDecl, ast.expr, _ExprResult]] = []
        for decl, arg in zip(parsed.params, node.args, strict=True):
            ann = decl.annotation
            is_array = isinstance(arg, ast.Name) and arg.id in self.arrays
            if isinstance(ann, lang.ArrayType) or (ann is None and is_array):
                ref = self.array_param(arg)
                if isinstance(ann, lang.ArrayType):
                    if isinstance(ann.element, lang.GenericType):
                        bind(ann.element, ref.dtype, arg)
                    elif ann.element.dtype is not ref.dtype:
                        raise self.error(
                            arg,
                            f"parameter {decl.name!r} of {parsed.name!r} is "
                            f"{ann!r}, the array is {_type_name(ref.dtype)}",
                        )
                child.arrays[decl.name] = ref
            elif is_array:
                raise self.error(
                    arg,
                    f"parameter {decl.name!r} of {parsed.name!r} is a scalar "
                    f"({ann!r}); pass an element, not the array",
                )
            else:
                scalars.append((decl, arg, self.expr(arg)))
        for decl, arg, value in scalars:
            if isinstance(decl.annotation, lang.GenericType) and isinstance(value, ir.Expr):
                bind(decl.annotation, value.type, arg)
        child.generics = generics
        entry: list[ir.Stmt] = []
        for decl, arg, value in scalars:
            ann = decl.annotation
            if ann is None and isinstance(value, _Untyped):
                child.constants[decl.name] = value  # a literal stays untyped in the callee
                continue
            if isinstance(ann, lang.GenericType) and ann.name not in generics:
                generics[ann.name] = self.default(arg, value).type
            typed = (
                self.default(arg, value)
                if ann is None
                else self.materialize(arg, value, child.resolve_type(arg, ann))
            )
            child.locals[decl.name] = typed.type
            child.decls[child.prefix + decl.name] = typed.type
            entry.append(ir.Assign(child.prefix + decl.name, typed, line=self.line(arg)))
        body_nodes = parsed.func.body
        returns = [n for n in ast.walk(parsed.func) if isinstance(n, ast.Return)]
        tail = isinstance(body_nodes[-1], ast.Return)
        frame = child.frame = _Frame(fn)
        line = self.line(node)
        if len(returns) > (1 if tail else 0):  # an early return: a one-trip loop to break out of
            frame.done = child.prefix + "done"
            child.decls[frame.done] = dtypes.bool_
        body = child.block(body_nodes)
        if frame.done is not None:
            once = ir.While(
                ir.Const(True, type=dtypes.bool_, line=line),
                (*body, ir.Break(line=line)),
                line=line,
            )
            body = (
                ir.Assign(frame.done, ir.Const(False, type=dtypes.bool_, line=line), line=line),
                once,
            )
        if frame.result is not None:
            assert frame.result_type is not None
            zero = ir.Const(
                False if frame.result_type is dtypes.bool_ else 0, type=frame.result_type, line=line
            )
            entry.append(ir.Assign(frame.result, zero, line=line))
        inlined = (*entry, *body)
        if parsed.filename != self.parsed.filename:  # lines of another file from here on
            inlined = ir.in_file(inlined, parsed.filename)
        self.pending.extend(inlined)
        if frame.result is None:
            return None
        assert frame.result_type is not None
        return ir.Var(frame.result, type=frame.result_type, line=line)

    def function_return(self, node: ast.Return, frame: _Frame) -> list[ir.Stmt]:
        """``return [value]`` in an inlined device function."""
        out: list[ir.Stmt] = []
        line = self.line(node)
        if node.value is not None:
            value = self.expr(node.value)
            if frame.result is None:
                typed = self.default(node.value, value)
                frame.result, frame.result_type = self.prefix + "result", typed.type
                self.decls[frame.result] = typed.type
            else:
                assert frame.result_type is not None
                typed = self.materialize(node.value, value, frame.result_type)
            out.append(ir.Assign(frame.result, typed, line=line))
        if frame.done is not None:
            out += [
                ir.Assign(frame.done, ir.Const(True, type=dtypes.bool_, line=line), line=line),
                ir.Break(line=line),
            ]
        return out

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
                v = (
                    0
                    if math.isnan(v)
                    else max(lo, min(hi, math.trunc(v)))
                    if math.isfinite(v)
                    else (hi if v > 0 else lo)
                )
            return self.materialize(node, _Untyped(v), dtype)
        if value.type is dtype:
            return value
        return ir.Cast(value, type=dtype, line=line)

    def intrinsic(self, node: ast.AST, name: str, args: list[_ExprResult]) -> ir.Expr:
        line = self.line(node)
        if name == "select":
            cond = args[0]
            if not isinstance(cond, ir.Expr) or cond.type is not dtypes.bool_:
                raise self.error(node, "K.select(cond, a, b) needs a bool cond; compare explicitly")
            branches = self.unify(node, args[1:]) or self.default_together(node, args[1:])
            return ir.Select(cond, branches[0], branches[1], type=branches[0].type, line=line)
        operands = self.unify(node, args) or self.default_together(node, args)
        t = operands[0].type
        if t is dtypes.bool_:
            raise self.error(node, f"K.{name} needs numbers, not bools")
        if name == "abs" and t.category == "uint":
            return operands[0]
        if name not in ("min", "max", "abs") and not t.is_float:
            raise self.error(
                node,
                f"K.{name} needs a float argument, not {_type_name(t)}; cast "
                "with K.F(x) or K.f32(x)",
            )
        return ir.Math(name, tuple(operands), type=t, line=line)

    # -------------------------------------------------------- statements

    def block(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for stmt in stmts:
            method = getattr(self, "stmt_" + type(stmt).__name__, None)
            if method is None:
                raise self.unsupported(stmt)
            outer, self.pending = self.pending, []
            try:
                lowered = method(stmt)
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

    def stmt_Pass(self, node: ast.Pass) -> list[ir.Stmt]:
        return []

    def stmt_Expr(self, node: ast.Expr) -> list[ir.Stmt]:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # docstring or comment string
        call = node.value
        if isinstance(call, ast.Call):
            runtime = isinstance(call.func, ast.Name) and self.is_runtime_name(call.func.id)
            fn = None if runtime else self.static(call.func)
            if isinstance(fn, lang.Intrinsic) and fn.name == "sync_cube":
                if call.args or call.keywords:
                    raise self.error(call, "K.sync_cube() takes no arguments")
                return [ir.SyncCube(line=self.line(node))]
            if isinstance(fn, DeviceFunction):
                self.call_function(call, fn)
                return []
            if isinstance(fn, lang.Intrinsic) and fn.name in _ATOMICS:
                value = self.expr(call)
                assert isinstance(value, ir.Expr)
                return [ir.Eval(value, line=self.line(node))]
            self.expr(call)  # a call of anything but a K function: says calling it fails
        raise self.error(
            node,
            "an expression statement has no effect in a kernel; assign it to "
            "a local or store it into an array",
        )

    def stmt_Return(self, node: ast.Return) -> list[ir.Stmt]:
        if self.frame is not None:
            return self.function_return(node, self.frame)
        if node.value is not None:
            raise self.error(
                node,
                "kernels return nothing; write results into an output array "
                "and use a bare 'return'",
            )
        return [ir.Return(line=self.line(node))]

    def stmt_Break(self, node: ast.Break) -> list[ir.Stmt]:
        return [ir.Break(line=self.line(node))]

    def stmt_Continue(self, node: ast.Continue) -> list[ir.Stmt]:
        return [ir.Continue(line=self.line(node))]

    def assign_local(
        self,
        node: ast.AST,
        name: str,
        value: _ExprResult,
        value_node: ast.AST,
        declared: DType | None = None,
    ) -> ir.Stmt:
        if name in self.params:
            raise self.error(
                node,
                f"parameter {name!r} is read-only; copy it into a local "
                "(or store into an array element)",
            )
        if name in self.constants:
            raise self.error(node, f"constant {name!r} is read-only")
        if name in self.loop_vars:
            raise self.error(
                node,
                f"the loop variable {name!r} cannot be assigned inside its loop; use another local",
            )
        if name in self.arrays:
            raise self.error(
                node,
                f"{name!r} is an array; store into an element ({name}[i] = "
                "...) or use another name",
            )
        if not self.prefix and _RESERVED.match(name):
            raise self.error(
                node,
                f"names like {name!r} (tf<digits>_...) are reserved for "
                "inlined device functions; rename the local",
            )
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
        self.decls.setdefault(self.prefix + name, typed.type)
        return ir.Assign(self.prefix + name, typed, line=self.line(node))

    def store(self, node: ast.Subscript, value: _ExprResult, value_node: ast.AST) -> ir.Stmt:
        array = self.array_param(node.value)
        index = self.index(node.slice, array)
        if isinstance(value, ir.Expr) and value.type is not array.dtype:
            raise self.error(
                node,
                f"storing a {_type_name(value.type)} into {array.name!r} whose elements are "
                f"{_type_name(array.dtype)}; cast with K.{_type_name(array.dtype)}(...)",
            )
        if array.shared_size is None:
            self.written.add(array.name)
        return ir.Store(
            array.name,
            index,
            self.materialize(value_node, value, array.dtype),
            line=self.line(node),
        )

    def stmt_Assign(self, node: ast.Assign) -> list[ir.Stmt]:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = x) is not supported")
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, (ast.Name, ast.Attribute))
            and not (isinstance(call.func, ast.Name) and self.is_runtime_name(call.func.id))
        ):
            fn = self.static(call.func)
            if isinstance(fn, lang.Intrinsic) and fn.name == "shared":
                return self.shared_decl(node, call)
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
            ast.Name(target.id, ast.Load())
            if isinstance(target, ast.Name)
            else ast.Subscript(target.value, target.slice, ast.Load()),
            target,
        )
        value = self.arith(node, op, self.expr(load), self.expr(node.value))
        return [self.assign_to(target, value, node)]

    def stmt_If(self, node: ast.If) -> list[ir.Stmt]:
        cond = self.condition(node.test, "'if'")
        return [ir.If(cond, self.block(node.body), self.block(node.orelse), line=self.line(node))]

    def stmt_While(self, node: ast.While) -> list[ir.Stmt]:
        if node.orelse:
            raise self.error(node, "'while ... else' is not supported")
        self.no_call_reason = "in a while condition (it is evaluated at every iteration)"
        try:
            cond = self.condition(node.test, "'while'")
        finally:
            self.no_call_reason = None
        return [ir.While(cond, self.block(node.body), line=self.line(node))]

    def stmt_For(self, node: ast.For) -> list[ir.Stmt]:  # noqa: C901 - the range() forms, checked in turn
        if node.orelse:
            raise self.error(node, "'for ... else' is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop target must be one name: for i in range(n)")
        it = node.iter
        if not (
            isinstance(it, ast.Call)
            and not isinstance(it.func, ast.Attribute)
            and isinstance(it.func, ast.Name)
            and not self.is_runtime_name(it.func.id)
            and self.static(it.func) is range
        ):
            raise self.error(it, "kernels loop only over range(...): for i in range(a, b, c)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(it, "range takes 1 to 3 positional arguments")
        args = [self.expr(a) for a in it.args]
        for arg, arg_node in zip(args, it.args, strict=True):
            if isinstance(arg, _Untyped) and isinstance(arg.value, float):
                raise self.error(
                    arg_node,
                    f"range needs integers, not the float {arg.value!r}; "
                    "write an int, or cast: K.i32(...) truncates",
                )
        if len(args) == 1:
            args = [_Untyped(0), args[0]]
        if len(args) == 2:
            args.append(_Untyped(1))
        name = node.target.id
        if name in self.params or name in self.constants or name in self.arrays:
            raise self.error(
                node.target, f"the loop variable {name!r} shadows a parameter or an array"
            )
        if name in self.loop_vars:
            raise self.error(
                node.target, f"the loop variable {name!r} is already used by an enclosing loop"
            )
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
        if not self.prefix and _RESERVED.match(name):
            raise self.error(
                node.target,
                f"names like {name!r} (tf<digits>_...) are reserved "
                "for inlined device functions; rename the local",
            )
        self.locals.setdefault(name, start.type)
        self.decls.setdefault(self.prefix + name, start.type)
        self.loop_vars.append(name)
        try:
            body = self.block(node.body)
        finally:
            self.loop_vars.pop()
        return [ir.For(self.prefix + name, start, stop, step, body, line=self.line(node))]


def lower(
    parsed: ParsedKernel,
    generics: Mapping[str, DType],
    params: tuple[ir.Param, ...],
    constants: Mapping[str, Any],
) -> ir.KernelIR:
    """Type-check ``parsed``'s body for the given resolved parameters and constants."""
    lowerer = _Lowerer(parsed, generics, params, constants)
    lowerer.top_level = {id(s) for s in parsed.func.body}
    body = lowerer.block(parsed.func.body)
    return ir.KernelIR(
        name=parsed.name,
        filename=parsed.filename,
        params=params,
        locals=tuple(lowerer.decls.items()),
        body=body,
        written=frozenset(lowerer.written),
        shared=tuple(lowerer.shared),
        atomic=frozenset(lowerer.atomic),
    )

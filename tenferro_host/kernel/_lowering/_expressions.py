"""Expressions: names, subscripts, arithmetic, comparisons and boolean operators."""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable
from typing import Any

from ... import dtypes
from .. import ir, lang
from ._base import (
    ARITH,
    COMPARE,
    MAX_EXPR_DEPTH,
    ArrayRef,
    ExprResult,
    LowererBase,
    Untyped,
    trunc_div,
    type_name,
)


class ExpressionLowering(LowererBase):
    """Lowers expressions (everything but calls)."""

    def expr(self, node: ast.expr) -> ExprResult:
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
            result: ExprResult = method(node)
        finally:
            self.depth -= 1
        return result

    def typed(self, node: ast.expr) -> ir.Expr:
        return self.default(node, self.expr(node))

    def expr_Constant(self, node: ast.Constant) -> ExprResult:
        v = node.value
        if isinstance(v, bool):
            return ir.Const(v, type=dtypes.bool_, line=self.line(node))
        if isinstance(v, (int, float)):
            return Untyped(v)
        raise self.error(node, f"the constant {v!r} is not a number or bool: not supported")

    def expr_Name(self, node: ast.Name) -> ExprResult:
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

    def static_value(self, node: ast.expr, obj: Any) -> ExprResult:
        if isinstance(obj, lang.ThreadIndex):
            return ir.ThreadIndex(obj.name, type=dtypes.uint32, line=self.line(node))
        if isinstance(obj, bool):
            return ir.Const(obj, type=dtypes.bool_, line=self.line(node))
        if isinstance(obj, (int, float)):
            return Untyped(obj)
        raise self.error(
            node,
            f"{obj!r} is not a kernel value; kernels read parameters, locals, K launch indices "
            "and int/float/bool constants",
        )

    def expr_Attribute(self, node: ast.Attribute) -> ExprResult:
        if isinstance(node.value, ast.Name) and node.value.id in self.arrays:
            a = self.arrays[node.value.id]
            if node.attr == "len":
                if a.shared is not None:
                    return self.shared_extent(a.shared, None, self.line(node))
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

    def expr_Subscript(self, node: ast.Subscript) -> ExprResult:
        value = node.value
        if (
            isinstance(value, ast.Attribute)
            and value.attr in ("shape", "stride")
            and isinstance(value.value, ast.Name)
            and value.value.id in self.arrays
        ):
            a = self.arrays[value.value.id]
            axis = self.axis(node.slice, a)
            if a.shared is not None:
                if value.attr == "shape":
                    return self.shared_extent(a.shared, axis, self.line(node))
                stride = math.prod(a.shared.shape[:axis])
                return ir.Const(stride, type=dtypes.uint32, line=self.line(node))
            cls = ir.ArrayShape if value.attr == "shape" else ir.ArrayStride
            return cls(a.name, axis, type=dtypes.uint32, line=self.line(node))
        array = self.array_param(value)
        index = self.index(node.slice, array)
        return ir.Load(array.name, index, type=array.dtype, line=self.line(node))

    def axis(self, node: ast.expr, p: ArrayRef) -> int:
        k = self.expr(node)
        if not isinstance(k, Untyped) or not isinstance(k.value, int):
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

    def array_param(self, node: ast.expr) -> ArrayRef:
        if isinstance(node, ast.Name) and node.id in self.arrays:
            return self.arrays[node.id]
        if isinstance(node, ast.Name) and self.is_runtime_name(node.id):
            raise self.error(node, f"{node.id!r} is a scalar and cannot be indexed")
        raise self.error(node, "only array parameters and shared arrays can be indexed")

    def index(self, node: ast.expr, array: ArrayRef) -> ir.Expr:
        """The storage index relative to the view's offset: ``a[i, j]`` (one index per
        dimension) is ``i * a.stride[0] + j * a.stride[1]`` in u32; a linear ``a[k]`` is ``k`` on
        a compact view or a shared array, ``k * a.stride[0]`` on a strided 1-D view, and refused
        on a non-compact view of more dimensions (it would read storage the view skips)."""
        if isinstance(node, ast.Slice):
            raise self.error(node, "slices are not supported; index with a[i] or a[i, j]")
        if not isinstance(node, ast.Tuple):
            k = self.integer_index(node)
            if array.shared is not None or array.compact:
                return k
            if array.ndim != 1:
                axes = ", ".join("ijklmn"[d] for d in range(array.ndim))
                raise self.error(
                    node,
                    f"linear index into {array.name!r}, a non-compact (strided or transposed) "
                    f"{array.ndim}-D view in this specialization: a linear index counts elements "
                    f"of a compact view only; index with one index per dimension, "
                    f"{array.name}[{axes}], or pass a compact copy (backend.canonicalize(t))",
                )
            return self.strided(k, array, 0, self.line(node))
        if len(node.elts) != array.ndim:
            what = (
                f"shared array {array.name!r} has {array.ndim} dimension(s)"
                if array.shared is not None
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
            term = self.strided(self.integer_index(elt), array, axis, line)
            total = term if total is None else ir.Binary("add", total, term, type=u32, line=line)
        assert total is not None
        return total

    def strided(self, k: ir.Expr, array: ArrayRef, axis: int, line: int) -> ir.Expr:
        """``k * array.stride[axis]`` in u32 (a shared array's strides are constants), ``k``
        marked as the index along ``axis`` (:class:`ir.AxisIndex`: the interpreter checks it
        against that dimension, before the cast, so a negative one reads as such)."""
        u32 = dtypes.uint32
        k = ir.AxisIndex(array.name, axis, k, type=k.type, line=line)
        if k.type is not u32:
            k = ir.Cast(k, type=u32, line=line)
        stride: ir.Expr
        if array.shared is not None:
            step = math.prod(array.shared.shape[:axis])
            if step == 1:
                return k
            stride = ir.Const(step, type=u32, line=line)
        else:
            stride = ir.ArrayStride(array.name, axis, type=u32, line=line)
        return ir.Binary("mul", k, stride, type=u32, line=line)

    def shared_extent(self, decl: ir.SharedArray, axis: int | None, line: int) -> ir.Expr:
        """``s.len`` (``axis`` None) or ``s.shape[axis]`` of a shared array, in u32: a constant,
        or the size parameter of a dynamic array."""
        u32 = dtypes.uint32
        if decl.size_param is None:
            size = decl.size if axis is None else decl.shape[axis]
            return ir.Const(size, type=u32, line=line)
        param = self.params[decl.size_param]
        n: ir.Expr = ir.Var(param.name, type=param.dtype, line=line)
        return n if n.type is u32 else ir.Cast(n, type=u32, line=line)

    def integer_index(self, node: ast.expr) -> ir.Expr:
        if isinstance(node, (ast.Tuple, ast.Slice)):
            raise self.error(node, "an index is one integer expression")
        idx = self.typed(node)
        if not idx.type.is_integer:
            raise self.error(
                node,
                f"an array index must be an integer, not "
                f"{type_name(idx.type)}; cast with K.u32(...)",
            )
        return idx

    def expr_UnaryOp(self, node: ast.UnaryOp) -> ExprResult:
        operand = self.expr(node.operand)
        line = self.line(node)
        if isinstance(node.op, ast.Not):
            if not isinstance(operand, ir.Expr) or operand.type is not dtypes.bool_:
                raise self.error(node, "'not' needs a bool; compare explicitly (x != 0)")
            return ir.Unary("not", operand, type=dtypes.bool_, line=line)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            if isinstance(operand, Untyped):
                return Untyped(-operand.value if isinstance(node.op, ast.USub) else operand.value)
            if operand.type is dtypes.bool_:
                raise self.error(node, "unary +/- needs a number, not a bool; cast with K.i32(b)")
            if isinstance(node.op, ast.UAdd):
                return operand
            return ir.Unary("neg", operand, type=operand.type, line=line)
        raise self.error(node, "'~' is not supported in kernels")

    def expr_BinOp(self, node: ast.BinOp) -> ExprResult:
        op = ARITH.get(type(node.op))
        if op is None:
            raise self.error(
                node,
                f"the operator {type(node.op).__name__} is not supported; "
                "kernels have + - * / // % **",
            )
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        return self.arith(node, op, lhs, rhs)

    def arith(self, node: ast.AST, op: str, lhs: ExprResult, rhs: ExprResult) -> ExprResult:
        operands = self.unify(node, [lhs, rhs])
        if operands is None:
            assert isinstance(lhs, Untyped) and isinstance(rhs, Untyped)
            return self.fold(node, op, lhs.value, rhs.value)
        a, b = operands
        t = a.type
        if t is dtypes.bool_:
            raise self.error(node, "arithmetic on bools is not supported; cast with K.i32(b)")
        if op == "div" and not t.is_float:
            raise self.error(
                node,
                f"'/' on integers ({type_name(t)}) is not supported: use '//' (truncates toward "
                "zero) or cast to a float type first",
            )
        if op == "pow" and not t.is_float:
            raise self.error(
                node, f"'**' needs floats, not {type_name(t)}; multiply, or cast to a float type"
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

    def fold(self, node: ast.AST, op: str, a: float, b: float) -> Untyped:
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
                return Untyped(trunc_div(a, b))
            if op == "mod":
                return Untyped(a - b * trunc_div(a, b))
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
            return Untyped(table[op]())
        except (OverflowError, ValueError) as exc:
            raise self.error(
                node,
                f"the constant expression {ast.unparse(node) if isinstance(node, ast.expr) else op}"
                f" has no finite real value ({exc}); write the intended value, or make one "
                "operand typed (e.g. K.f32(...)) to compute it at run time with IEEE rules",
            ) from None

    def expr_Compare(self, node: ast.Compare) -> ExprResult:
        operands = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        comparisons: list[ir.Expr] = []
        for k, op_node in enumerate(node.ops):
            op = COMPARE.get(type(op_node))
            if op is None:
                raise self.error(
                    node,
                    f"'{type(op_node).__name__}' comparisons are not supported;"
                    " use < <= > >= == !=",
                )
            comparisons.append(self.compare(node, op, operands[k], operands[k + 1]))
        return self.balanced("and", comparisons, self.line(node))

    def compare(self, node: ast.AST, op: str, lhs: ExprResult, rhs: ExprResult) -> ir.Expr:
        line = self.line(node)
        operands = self.unify(node, [lhs, rhs])
        if operands is None:
            assert isinstance(lhs, Untyped) and isinstance(rhs, Untyped)
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

    def expr_BoolOp(self, node: ast.BoolOp) -> ExprResult:
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

"""Expressions: names, subscripts, arithmetic, comparisons and boolean operators."""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable
from typing import Any

from ... import dtypes
from .. import ir, lang
from ._lowerer import (
    ARITH,
    COMPARE,
    ArrayRef,
    ExprResult,
    Lowerer,
    Table,
    Untyped,
    trunc_div,
    type_name,
)


def lower_constant(lw: Lowerer, node: ast.Constant) -> ExprResult:
    v = node.value
    if isinstance(v, bool):
        return ir.Const(v, type=dtypes.bool_, line=lw.line(node))
    if isinstance(v, (int, float)):
        return Untyped(v)
    raise lw.error(node, f"the constant {v!r} is not a number or bool: not supported")


def lower_name(lw: Lowerer, node: ast.Name) -> ExprResult:
    name = node.id
    if lw.is_fragment(name):
        raise lw.error(
            node,
            f"{name!r} is a matrix fragment, not a value: pass it to K.fill_fragment, "
            "K.load_fragment, K.store_fragment or K.mma",
        )
    if name in lw.locals:
        return ir.Var(lw.prefix + name, type=lw.locals[name], line=lw.line(node))
    if name in lw.arrays:
        raise lw.error(
            node,
            f"array {name!r} is used as a value; index it ({name}[i]) or use "
            f"{name}.len / {name}.shape[k] / {name}.stride[k]",
        )
    if name in lw.params:
        return ir.Var(name, type=lw.params[name].dtype, line=lw.line(node))
    if name in lw.constants:
        return lw.constants[name]
    if name in lw.namespace or hasattr(builtins, name):
        return static_value(lw, node, lw.static(node))
    raise lw.error(node, f"{name!r} is used before assignment (or is not defined)")


def static_value(lw: Lowerer, node: ast.expr, obj: Any) -> ExprResult:
    """The value of a name that is no runtime value: a launch index, a subgroup fact, or an
    int/float/bool constant."""
    if isinstance(obj, lang.SubgroupFact):
        return ir.SubgroupFact(obj.name, type=dtypes.uint32, line=lw.line(node))
    if isinstance(obj, lang.ThreadIndex):
        return ir.ThreadIndex(obj.name, type=dtypes.uint32, line=lw.line(node))
    if isinstance(obj, bool):
        return ir.Const(obj, type=dtypes.bool_, line=lw.line(node))
    if isinstance(obj, (int, float)):
        return Untyped(obj)
    raise lw.error(
        node,
        f"{obj!r} is not a kernel value; kernels read parameters, locals, K launch indices "
        "and int/float/bool constants",
    )


def lower_attribute(lw: Lowerer, node: ast.Attribute) -> ExprResult:
    if isinstance(node.value, ast.Name) and node.value.id in lw.arrays:
        a = lw.arrays[node.value.id]
        if node.attr == "len":
            if a.declared is not None:
                return declared_extent(lw, a.declared, None, lw.line(node))
            return ir.ArrayLen(a.name, type=dtypes.uint32, line=lw.line(node))
        if node.attr in ("shape", "stride"):
            raise lw.error(
                node, f"index .{node.attr} with a constant: {node.value.id}.{node.attr}[0]"
            )
        raise lw.error(
            node,
            f"{node.value.id}.{node.attr} is not supported; arrays have .len, .shape[k], "
            ".stride[k]",
        )
    if isinstance(node.value, ast.Name) and lw.is_runtime_name(node.value.id):
        raise lw.error(node, f"scalars have no attributes ({node.value.id}.{node.attr})")
    return static_value(lw, node, lw.static(node))


def lower_subscript(lw: Lowerer, node: ast.Subscript) -> ExprResult:
    value = node.value
    if (
        isinstance(value, ast.Attribute)
        and value.attr in ("shape", "stride")
        and isinstance(value.value, ast.Name)
        and value.value.id in lw.arrays
    ):
        a = lw.arrays[value.value.id]
        axis = constant_axis(lw, node.slice, a)
        if a.declared is not None:
            if value.attr == "shape":
                return declared_extent(lw, a.declared, axis, lw.line(node))
            stride = math.prod(a.declared.shape[:axis])
            return ir.Const(stride, type=dtypes.uint32, line=lw.line(node))
        cls = ir.ArrayShape if value.attr == "shape" else ir.ArrayStride
        return cls(a.name, axis, type=dtypes.uint32, line=lw.line(node))
    array = array_param(lw, value)
    index = array_index(lw, node.slice, array)
    return ir.Load(array.name, index, type=array.dtype, line=lw.line(node))


def constant_axis(lw: Lowerer, node: ast.expr, p: ArrayRef) -> int:
    k = lw.expr(node)
    if not isinstance(k, Untyped) or not isinstance(k.value, int):
        raise lw.error(
            node,
            "the axis of .shape[k]/.stride[k] must be a compile-time int "
            "(a literal or a K.Const[int] parameter)",
        )
    axis = k.value + p.ndim if k.value < 0 else k.value
    if not 0 <= axis < p.ndim:
        raise lw.error(
            node,
            f"axis {k.value} is out of range for {p.name!r}, which has "
            f"{p.ndim} dimension(s) in this specialization",
        )
    return axis


def array_param(lw: Lowerer, node: ast.expr) -> ArrayRef:
    if isinstance(node, ast.Name) and node.id in lw.arrays:
        return lw.arrays[node.id]
    if isinstance(node, ast.Name) and lw.is_fragment(node.id):
        raise lw.error(
            node,
            f"{node.id!r} holds matrix fragments, not values: pass {node.id}[i] to "
            "K.fill_fragment, K.load_fragment, K.store_fragment or K.mma",
        )
    if isinstance(node, ast.Name) and lw.is_runtime_name(node.id):
        raise lw.error(node, f"{node.id!r} is a scalar and cannot be indexed")
    raise lw.error(node, "only array parameters, shared arrays and register arrays can be indexed")


def array_index(lw: Lowerer, node: ast.expr, array: ArrayRef) -> ir.Expr:
    """The storage index relative to the view's offset: ``a[i, j]`` (one index per
    dimension) is ``i * a.stride[0] + j * a.stride[1]`` in u32; a linear ``a[k]`` is ``k`` on
    a compact view or a declared (shared or register) array, ``k * a.stride[0]`` on a strided
    1-D view, and refused on a non-compact view of more dimensions (it would read storage the
    view skips)."""
    if isinstance(node, ast.Slice):
        raise lw.error(node, "slices are not supported; index with a[i] or a[i, j]")
    if not isinstance(node, ast.Tuple):
        k = integer_index(lw, node)
        if array.declared is not None or array.compact:
            return k
        if array.ndim != 1:
            axes = ", ".join("ijklmn"[d] for d in range(array.ndim))
            raise lw.error(
                node,
                f"linear index into {array.name!r}, a non-compact (strided or transposed) "
                f"{array.ndim}-D view in this specialization: a linear index counts elements "
                f"of a compact view only; index with one index per dimension, "
                f"{array.name}[{axes}], or pass a compact copy (backend.canonicalize(t))",
            )
        return strided_index(lw, k, array, 0, lw.line(node))
    if len(node.elts) != array.ndim:
        what = (
            f"{array.kind} {array.name!r} has {array.ndim} dimension(s)"
            if array.declared is not None
            else f"{array.name!r} has {array.ndim} dimension(s) in this specialization"
        )
        raise lw.error(
            node,
            f"{len(node.elts)} indices given but {what}; index with one "
            "per dimension, or one linear index a[k]",
        )
    u32 = dtypes.uint32
    line = lw.line(node)
    total: ir.Expr | None = None
    for axis, elt in enumerate(node.elts):
        term = strided_index(lw, integer_index(lw, elt), array, axis, line)
        total = term if total is None else ir.Binary("add", total, term, type=u32, line=line)
    assert total is not None
    return total


def strided_index(lw: Lowerer, k: ir.Expr, array: ArrayRef, axis: int, line: int) -> ir.Expr:
    """``k * array.stride[axis]`` in u32 (a declared array's strides are constants), ``k``
    marked as the index along ``axis`` (:class:`ir.AxisIndex`: the interpreter checks it
    against that dimension, before the cast, so a negative one reads as such)."""
    u32 = dtypes.uint32
    k = ir.AxisIndex(array.name, axis, k, type=k.type, line=line)
    if k.type is not u32:
        k = ir.Cast(k, type=u32, line=line)
    stride: ir.Expr
    if array.declared is not None:
        step = math.prod(array.declared.shape[:axis])
        if step == 1:
            return k
        stride = ir.Const(step, type=u32, line=line)
    else:
        stride = ir.ArrayStride(array.name, axis, type=u32, line=line)
    return ir.Binary("mul", k, stride, type=u32, line=line)


def declared_extent(
    lw: Lowerer, decl: ir.SharedArray | ir.RegisterArray, axis: int | None, line: int
) -> ir.Expr:
    """``s.len`` (``axis`` None) or ``s.shape[axis]`` of a shared or register array, in u32: a
    constant, or the size parameter of a shared array sized at launch."""
    u32 = dtypes.uint32
    if not isinstance(decl, ir.SharedArray) or decl.size_param is None:
        size = decl.size if axis is None else decl.shape[axis]
        return ir.Const(size, type=u32, line=line)
    param = lw.params[decl.size_param]
    n: ir.Expr = ir.Var(param.name, type=param.dtype, line=line)
    return n if n.type is u32 else ir.Cast(n, type=u32, line=line)


def integer_index(lw: Lowerer, node: ast.expr) -> ir.Expr:
    if isinstance(node, (ast.Tuple, ast.Slice)):
        raise lw.error(node, "an index is one integer expression")
    idx = lw.typed(node)
    if not idx.type.is_integer:
        raise lw.error(
            node,
            f"an array index must be an integer, not {type_name(idx.type)}; cast with K.u32(...)",
        )
    return idx


def lower_unary(lw: Lowerer, node: ast.UnaryOp) -> ExprResult:
    operand = lw.expr(node.operand)
    line = lw.line(node)
    if isinstance(node.op, ast.Not):
        if not isinstance(operand, ir.Expr) or operand.type is not dtypes.bool_:
            raise lw.error(node, "'not' needs a bool; compare explicitly (x != 0)")
        return ir.Unary("not", operand, type=dtypes.bool_, line=line)
    if isinstance(node.op, (ast.USub, ast.UAdd)):
        if isinstance(operand, Untyped):
            return Untyped(-operand.value if isinstance(node.op, ast.USub) else operand.value)
        if operand.type is dtypes.bool_:
            raise lw.error(node, "unary +/- needs a number, not a bool; cast with K.i32(b)")
        if isinstance(node.op, ast.UAdd):
            return operand
        return ir.Unary("neg", operand, type=operand.type, line=line)
    raise lw.error(node, "'~' is not supported in kernels")


def lower_binop(lw: Lowerer, node: ast.BinOp) -> ExprResult:
    op = ARITH.get(type(node.op))
    if op is None:
        raise lw.error(
            node,
            f"the operator {type(node.op).__name__} is not supported; kernels have + - * / // % **",
        )
    lhs, rhs = lw.expr(node.left), lw.expr(node.right)
    return arithmetic(lw, node, op, lhs, rhs)


def arithmetic(lw: Lowerer, node: ast.AST, op: str, lhs: ExprResult, rhs: ExprResult) -> ExprResult:
    operands = lw.unify(node, [lhs, rhs])
    if operands is None:
        assert isinstance(lhs, Untyped) and isinstance(rhs, Untyped)
        return fold_literals(lw, node, op, lhs.value, rhs.value)
    a, b = operands
    t = a.type
    if t is dtypes.bool_:
        raise lw.error(node, "arithmetic on bools is not supported; cast with K.i32(b)")
    if op == "div" and not t.is_float:
        raise lw.error(
            node,
            f"'/' on integers ({type_name(t)}) is not supported: use '//' (truncates toward "
            "zero) or cast to a float type first",
        )
    if op == "pow" and not t.is_float:
        raise lw.error(
            node, f"'**' needs floats, not {type_name(t)}; multiply, or cast to a float type"
        )
    if op in ("floordiv", "mod") and not t.is_float and isinstance(b, ir.Const) and b.value == 0:
        raise lw.error(
            node,
            "integer division or remainder by the constant zero; guard "
            "the divisor or use a float type",
        )
    return ir.Binary(op, a, b, type=t, line=lw.line(node))


def fold_literals(lw: Lowerer, node: ast.AST, op: str, a: float, b: float) -> Untyped:
    """Two untyped literals: computed now, with the DSL's (C) semantics."""
    if op in ("div", "floordiv", "mod") and b == 0:
        raise lw.error(node, "division by zero in a constant expression")
    if isinstance(a, int) and isinstance(b, int):
        if op == "div":
            raise lw.error(
                node,
                "'/' on integer literals is not supported: use '//' "
                "(truncates toward zero) or write float literals",
            )
        if op == "pow":
            raise lw.error(
                node,
                "'**' on integer literals is not supported; write the value or use float literals",
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
        raise lw.error(
            node,
            f"the constant expression {ast.unparse(node) if isinstance(node, ast.expr) else op}"
            f" has no finite real value ({exc}); write the intended value, or make one "
            "operand typed (e.g. K.f32(...)) to compute it at run time with IEEE rules",
        ) from None


def lower_compare(lw: Lowerer, node: ast.Compare) -> ExprResult:
    operands = [lw.expr(node.left)] + [lw.expr(c) for c in node.comparators]
    comparisons: list[ir.Expr] = []
    for k, op_node in enumerate(node.ops):
        op = COMPARE.get(type(op_node))
        if op is None:
            raise lw.error(
                node,
                f"'{type(op_node).__name__}' comparisons are not supported; use < <= > >= == !=",
            )
        comparisons.append(comparison(lw, node, op, operands[k], operands[k + 1]))
    return balanced_logical(lw, "and", comparisons, lw.line(node))


def comparison(lw: Lowerer, node: ast.AST, op: str, lhs: ExprResult, rhs: ExprResult) -> ir.Expr:
    line = lw.line(node)
    operands = lw.unify(node, [lhs, rhs])
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
        raise lw.error(node, "bools compare only with == and !=")
    return ir.Compare(op, a, b, type=dtypes.bool_, line=line)


def bool_condition(lw: Lowerer, node: ast.expr, what: str) -> ir.Expr:
    value = lw.expr(node)
    if not isinstance(value, ir.Expr) or value.type is not dtypes.bool_:
        raise lw.error(node, f"{what} needs a bool; compare explicitly (e.g. x != 0)")
    return value


def lower_boolop(lw: Lowerer, node: ast.BoolOp) -> ExprResult:
    op = "and" if isinstance(node.op, ast.And) else "or"
    values = [bool_condition(lw, node.values[0], f"'{op}'")]
    outer, lw.no_call_reason = (
        lw.no_call_reason,
        (f"in the right operand of '{op}' (it is evaluated only where it decides)"),
    )
    try:
        values += [bool_condition(lw, v, f"'{op}'") for v in node.values[1:]]
    finally:
        lw.no_call_reason = outer
    return balanced_logical(lw, op, values, lw.line(node))


def balanced_logical(lw: Lowerer, op: str, values: list[ir.Expr], line: int) -> ir.Expr:
    """``v0 op v1 op ...`` as a balanced tree: the same short-circuit order and result
    (and/or are associative), log2(n) deep instead of n."""
    if len(values) == 1:
        return values[0]
    half = len(values) // 2
    return ir.Logical(
        op,
        balanced_logical(lw, op, values[:half], line),
        balanced_logical(lw, op, values[half:], line),
        type=dtypes.bool_,
        line=line,
    )


HANDLERS: Table = {
    ast.Constant: lower_constant,
    ast.Name: lower_name,
    ast.Attribute: lower_attribute,
    ast.Subscript: lower_subscript,
    ast.UnaryOp: lower_unary,
    ast.BinOp: lower_binop,
    ast.Compare: lower_compare,
    ast.BoolOp: lower_boolop,
}

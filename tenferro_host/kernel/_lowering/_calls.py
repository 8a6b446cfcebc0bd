"""Calls: casts, K intrinsics, atomics, shared arrays and inlined device functions."""

from __future__ import annotations

import ast
import copy
import math

from ... import dtypes
from ...dtypes import DType
from .. import ir, lang
from .._frontend import DeviceFunction, ParamDecl
from ..ir import U32_MAX
from ._expressions import array_index, array_param
from ._lowerer import (
    ArrayRef,
    ExprResult,
    Frame,
    Lowerer,
    Table,
    Untyped,
    compile_time_int,
    int_range,
    round_float,
    type_name,
)

ATOMICS = {"atomic_" + op: op for op in ir.ATOMIC_OPS}
_ATOMIC_TYPES = ("int32", "uint32", "float32", "int64", "float64")


def lower_call(lw: Lowerer, node: ast.Call) -> ExprResult:
    if isinstance(node.func, ast.Name) and lw.is_runtime_name(node.func.id):
        raise lw.error(node, f"{node.func.id!r} is not callable")
    fn = lw.static(node.func)
    if node.keywords:
        raise lw.error(node, "kernel functions take positional arguments only")
    if isinstance(fn, (lang.ScalarType, lang.GenericType)):
        if len(node.args) != 1:
            raise lw.error(node, f"the cast {fn!r}(x) takes exactly one argument")
        return cast_value(lw, node, lw.resolve_type(node, fn), lw.expr(node.args[0]))
    if isinstance(fn, DeviceFunction):
        result = call_function(lw, node, fn)
        if result is None:
            raise lw.error(
                node,
                f"device function {fn.parsed.name!r} returns no value; call it as a statement",
            )
        return result
    if isinstance(fn, lang.Intrinsic):
        handler = lw.call_handler("value", fn) or math_call
        if handler is not no_value and len(node.args) != fn.arity:  # (no value: say why first)
            raise lw.error(node, f"K.{fn.name} takes {fn.arity} argument(s), got {len(node.args)}")
        value: ir.Expr = handler(lw, node, fn.name)
        return value
    if fn is range:
        raise lw.error(node, "range(...) is only supported as 'for i in range(...)'")
    if fn in (int, float, bool):
        raise lw.error(
            node,
            f"{fn.__name__}(...) is not supported; cast with K.I(x), "
            "K.F(x), K.u32(x), K.f32(x), K.bool_(x) ...",
        )
    raise lw.error(
        node,
        f"calling {ast.unparse(node.func)} is not supported in kernels; kernels call only "
        "K functions (K.sqrt, K.atomic_add ...), casts (K.f32(x), K.F(x) ...) and @K.func "
        "device functions",
    )


# -------------------------------------------------------- cooperation


def atomic_call(lw: Lowerer, node: ast.Call, name: str) -> ir.Atomic:
    """``K.atomic_<op>(a, index, [compare,] value)``: the element's old value."""
    op = ATOMICS[name]
    array = array_param(lw, node.args[0])
    if array.dtype.name not in _ATOMIC_TYPES:
        raise lw.error(
            node,
            f"atomics need i32, u32 or f32 elements (i64 and f64 on cuda "
            f"and cpu), not {type_name(array.dtype)}",
        )
    if array.registers is not None:
        raise lw.error(
            node.args[0],
            f"{array.name!r} is a register array, its unit's own: no other unit can race on "
            "it, so update it with a plain store (r[i] += v), not an atomic",
        )
    index = array_index(lw, node.args[1], array)
    operands = [lw.materialize(a, lw.expr(a), array.dtype) for a in node.args[2:]]
    if array.declared is None:
        lw.written.add(array.name)
    lw.atomic.add(array.name)
    compare = operands[0] if op == "compare_exchange" else None
    return ir.Atomic(
        op, array.name, index, operands[-1], compare, type=array.dtype, line=lw.line(node)
    )


#: Each kind of declared array: the intrinsic that declares it and an example of its call.
_DECLARATIONS = {
    "shared": ("K.shared", "K.shared(K.f32, 256)"),
    "register": ("K.registers", "K.registers(K.f32, 16)"),
}


def declaration(lw: Lowerer, node: ast.Assign, call: ast.Call, kind: str) -> tuple[str, DType]:
    """The name and element type of a ``K.shared`` (``kind`` "shared") or ``K.registers``
    ("register") declaration, refused anywhere but the kernel's top level."""
    target = lw.single_target(node)
    what = f"{kind} array"
    intrinsic, call_example = _DECLARATIONS[kind]
    example = f"{kind[0]} = {call_example}"
    if lw.frame is not None:
        raise lw.error(
            node,
            f"declare {what}s in the kernel and pass them to the device function as arguments",
        )
    if id(node) not in lw.top_level:
        owner = "a cube's" if kind == "shared" else "each unit's"
        raise lw.error(
            node,
            f"{intrinsic}(...) declares {owner} {what} once: write it at the top level of the "
            "kernel body, not inside if/for/while",
        )
    if not isinstance(target, ast.Name):
        raise lw.error(node, f"assign a {what} to one name: {example}")
    if len(call.args) != 2 or call.keywords:
        raise lw.error(call, f"{intrinsic} takes (element type, size): {call_example}")
    name = target.id
    if lw.is_runtime_name(name):
        raise lw.error(
            target,
            f"{name!r} is already a parameter, local or declared array; give the {what} its own "
            "name",
        )
    dtype = lw.resolve_type(call.args[0], lw.static(call.args[0]))
    if dtype is dtypes.bool_:
        raise lw.error(
            call.args[0],
            f"{what}s of bool are not supported; store 0/1 in a K.u32 {what}",
        )
    return name, dtype


def declared_shape(lw: Lowerer, size: ast.expr, kind: str, limit: int) -> tuple[int, ...]:
    """The compile-time dimensions of a declared array, 1 to ``limit`` elements in all."""
    dims = size.elts if isinstance(size, ast.Tuple) else [size]
    shape = tuple(declared_dim(lw, d, isinstance(size, ast.Tuple), kind) for d in dims)
    total = math.prod(shape)
    if not shape or total > limit:
        why = "u32 indices" if kind == "shared" else "a unit's registers are few"
        raise lw.error(
            size,
            f"a {kind} array holds 1 to {limit} elements ({why}); "
            f"{ast.unparse(size)} gives {total}",
        )
    return shape


def shared_decl(lw: Lowerer, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
    """``name = K.shared(T, size)`` at the kernel's top level."""
    name, dtype = declaration(lw, node, call, "shared")
    size = call.args[1]
    line = lw.line(node)
    if isinstance(size, ast.Name) and size.id in lw.params:
        decl = dynamic_shared_decl(lw, name, dtype, size, line)
    else:
        shape = declared_shape(lw, size, "shared", U32_MAX)
        decl = ir.SharedArray(name, dtype, math.prod(shape), line=line, shape=shape)
    lw.shared.append(decl)
    lw.arrays[name] = ArrayRef(name, dtype, len(decl.shape), decl)
    return []


def registers_decl(lw: Lowerer, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
    """``name = K.registers(T, size)`` at the kernel's top level."""
    name, dtype = declaration(lw, node, call, "register")
    shape = declared_shape(lw, call.args[1], "register", ir.REGISTER_ARRAY_MAX)
    decl = ir.RegisterArray(name, dtype, math.prod(shape), line=lw.line(node), shape=shape)
    lw.registers.append(decl)
    lw.arrays[name] = ArrayRef(name, dtype, len(shape), registers=decl)
    return []


def declared_dim(lw: Lowerer, node: ast.expr, in_tuple: bool, kind: str) -> int:
    """One compile-time dimension of a shared, register or fragment array."""
    if isinstance(node, ast.Name) and node.id in lw.params:
        raise lw.error(
            node,
            f"{node.id!r} is a runtime parameter: a shared array sized at launch has one "
            f"dimension, K.shared(T, {node.id}); give the others as compile-time ints"
            if kind == "shared"
            else f"{node.id!r} is a runtime parameter: a {kind} array's size is a "
            "compile-time int (a literal, a K.Const[int] or a module constant)",
        )
    value = compile_time_int(lw.expr(node))
    if value is None or not 0 < value <= U32_MAX:
        what = f"each dimension of a {kind} array" if in_tuple else f"the size of a {kind} array"
        raise lw.error(
            node,
            f"{what} is a positive compile-time int (a literal, a K.Const[int] or a module "
            "constant)"
            + (
                ", or, for an array sized at launch, a runtime integer parameter: "
                "K.shared(K.f32, n)"
                if kind == "shared"
                else ""
            ),
        )
    return value


def dynamic_shared_decl(
    lw: Lowerer, name: str, dtype: DType, size: ast.Name, line: int
) -> ir.SharedArray:
    """``K.shared(T, n)`` with ``n`` a runtime integer parameter: sized at each launch."""
    param = lw.params[size.id]
    if param.kind != "scalar" or not param.dtype.is_integer:
        raise lw.error(
            size,
            f"a shared array sized at launch takes its size from an integer scalar "
            f"parameter; {size.id!r} is "
            + ("an array" if param.kind != "scalar" else type_name(param.dtype)),
        )
    return ir.SharedArray(name, dtype, 0, line=line, shape=(0,), size_param=size.id)


# -------------------------------------------------------- device functions


def call_function(  # noqa: C901 - each refusal of an inlined call, then the inlining
    lw: Lowerer, node: ast.Call, fn: DeviceFunction
) -> ir.Var | None:
    """Inline ``fn`` at this call: its statements go to ``pending`` (ahead of the statement
    being lowered), its result is a fresh local (None when it returns no value)."""
    parsed = fn.parsed
    if lw.no_call_reason is not None:
        raise lw.error(
            node,
            f"device functions cannot be called {lw.no_call_reason}; "
            "assign the call's result to a local first",
        )
    if fn in lw.calls:
        chain = " -> ".join(f.parsed.name for f in (*lw.calls, fn))
        raise lw.error(
            node,
            f"device function {parsed.name!r} calls itself ({chain}): "
            "recursion is not supported; write a loop",
        )
    if node.keywords or len(node.args) != len(parsed.params):
        raise lw.error(
            node,
            f"device function {parsed.name!r} takes "
            f"{len(parsed.params)} positional argument(s), got "
            f"{len(node.args)}",
        )
    lw.inlined[0] += 1
    child = copy.copy(lw)
    child.parsed, child.namespace, child.prefix = (
        parsed,
        parsed.namespace(),
        f"tf{lw.inlined[0]}_",
    )
    child.params, child.constants, child.arrays, child.locals = {}, {}, {}, {}
    child.loop_vars, child.pending, child.top_level = [], [], set()
    child.calls = (*lw.calls, fn)
    generics: dict[str, DType] = {}

    def bind(generic: lang.GenericType, dtype: DType, where: ast.AST) -> None:
        have = generics.setdefault(generic.name, dtype)
        if not generic.accepts(dtype) or have is not dtype:
            raise lw.error(
                where,
                f"K.{generic.name} of {parsed.name!r} is "
                f"{type_name(have)} here but this argument is "
                f"{type_name(dtype)}",
            )

    scalars: list[tuple[ParamDecl, ast.expr, ExprResult]] = []
    for decl, arg in zip(parsed.params, node.args, strict=True):
        ann = decl.annotation
        is_array = isinstance(arg, ast.Name) and arg.id in lw.arrays
        if isinstance(ann, lang.ArrayType) or (ann is None and is_array):
            ref = array_param(lw, arg)
            if isinstance(ann, lang.ArrayType):
                if isinstance(ann.element, lang.GenericType):
                    bind(ann.element, ref.dtype, arg)
                elif ann.element.dtype is not ref.dtype:
                    raise lw.error(
                        arg,
                        f"parameter {decl.name!r} of {parsed.name!r} is "
                        f"{ann!r}, the array is {type_name(ref.dtype)}",
                    )
            child.arrays[decl.name] = ref
        elif is_array:
            raise lw.error(
                arg,
                f"parameter {decl.name!r} of {parsed.name!r} is a scalar "
                f"({ann!r}); pass an element, not the array",
            )
        else:
            scalars.append((decl, arg, lw.expr(arg)))
    for decl, arg, value in scalars:
        if isinstance(decl.annotation, lang.GenericType) and isinstance(value, ir.Expr):
            bind(decl.annotation, value.type, arg)
    child.generics = generics
    entry: list[ir.Stmt] = []
    for decl, arg, value in scalars:
        ann = decl.annotation
        if ann is None and isinstance(value, Untyped):
            child.constants[decl.name] = value  # a literal stays untyped in the callee
            continue
        if isinstance(ann, lang.GenericType) and ann.name not in generics:
            generics[ann.name] = lw.default(arg, value).type
        typed = (
            lw.default(arg, value)
            if ann is None
            else lw.materialize(arg, value, child.resolve_type(arg, ann))
        )
        child.locals[decl.name] = typed.type
        child.decls[child.prefix + decl.name] = typed.type
        entry.append(ir.Assign(child.prefix + decl.name, typed, line=lw.line(arg)))
    body_nodes = parsed.func.body
    returns = [n for n in ast.walk(parsed.func) if isinstance(n, ast.Return)]
    tail = isinstance(body_nodes[-1], ast.Return)
    frame = child.frame = Frame(fn)
    line = lw.line(node)
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
    if parsed.filename != lw.parsed.filename:  # lines of another file from here on
        inlined = ir.in_file(inlined, parsed.filename)
    lw.pending.extend(inlined)
    if frame.result is None:
        return None
    assert frame.result_type is not None
    return ir.Var(frame.result, type=frame.result_type, line=line)


def function_return(lw: Lowerer, node: ast.Return, frame: Frame) -> list[ir.Stmt]:
    """``return [value]`` in an inlined device function."""
    out: list[ir.Stmt] = []
    line = lw.line(node)
    if node.value is not None:
        value = lw.expr(node.value)
        if frame.result is None:
            typed = lw.default(node.value, value)
            frame.result, frame.result_type = lw.prefix + "result", typed.type
            lw.decls[frame.result] = typed.type
        else:
            assert frame.result_type is not None
            typed = lw.materialize(node.value, value, frame.result_type)
        out.append(ir.Assign(frame.result, typed, line=line))
    if frame.done is not None:
        out += [
            ir.Assign(frame.done, ir.Const(True, type=dtypes.bool_, line=line), line=line),
            ir.Break(line=line),
        ]
    return out


def cast_value(lw: Lowerer, node: ast.AST, dtype: DType, value: ExprResult) -> ir.Expr:
    line = lw.line(node)
    if isinstance(value, Untyped):
        v = value.value
        if dtype is dtypes.bool_:
            return ir.Const(v != 0, type=dtype, line=line)
        if dtype.is_float:
            return ir.Const(round_float(float(v), dtype), type=dtype, line=line)
        if isinstance(v, float):  # the run-time rule: truncate, saturate, NaN -> 0
            lo, hi = int_range(dtype)
            v = (
                0
                if math.isnan(v)
                else max(lo, min(hi, math.trunc(v)))
                if math.isfinite(v)
                else (hi if v > 0 else lo)
            )
        return lw.materialize(node, Untyped(v), dtype)
    if value.type is dtype:
        return value
    return ir.Cast(value, type=dtype, line=line)


def math_call(lw: Lowerer, node: ast.Call, name: str) -> ir.Expr:
    """``K.select(cond, a, b)`` or a math function (``K.sqrt`` ...): every intrinsic call with
    a value that no other handler takes."""
    args = [lw.expr(a) for a in node.args]
    line = lw.line(node)
    if name == "select":
        cond = args[0]
        if not isinstance(cond, ir.Expr) or cond.type is not dtypes.bool_:
            raise lw.error(node, "K.select(cond, a, b) needs a bool cond; compare explicitly")
        branches = lw.unify(node, args[1:]) or lw.default_together(node, args[1:])
        return ir.Select(cond, branches[0], branches[1], type=branches[0].type, line=line)
    operands = lw.unify(node, args) or lw.default_together(node, args)
    t = operands[0].type
    if t is dtypes.bool_:
        raise lw.error(node, f"K.{name} needs numbers, not bools")
    if name == "abs" and t.category == "uint":
        return operands[0]
    if name not in ("min", "max", "abs") and not t.is_float:
        raise lw.error(
            node,
            f"K.{name} needs a float argument, not {type_name(t)}; cast with K.F(x) or K.f32(x)",
        )
    return ir.Math(name, tuple(operands), type=t, line=line)


_NO_VALUE = {
    "shared": "K.shared(T, size) declares a cube's shared array: write "
    "'name = K.shared(K.f32, 256)' at the top level of the kernel body",
    "registers": "K.registers(T, size) declares each unit's register array: write "
    "'name = K.registers(K.f32, 16)' at the top level of the kernel body",
    "static_range": "K.static_range(...) is what a loop runs over: 'for i in K.static_range(8):'",
    "sync_cube": "K.sync_cube() is a statement of its own; it has no value",
    "copy_async": "K.copy_async(s, at, x, start, count) is a statement; it has no value",
    "commit_copies": "K.commit_copies() is a statement of its own; it has no value",
    "wait_copies": "K.wait_copies(n) is a statement of its own; it has no value",
    "load4": "K.load4 gives four values: write 'a, b, c, d = K.load4(x, k)'",
    "store4": "K.store4(x, k, a, b, c, d) is a statement; it has no value",
}


def no_value(lw: Lowerer, node: ast.Call, name: str) -> ir.Expr:
    """An intrinsic whose call is a statement or a declaration, used as a value."""
    raise lw.error(node, _NO_VALUE[name])


HANDLERS: Table = {
    ast.Call: lower_call,
    ("assign", "shared"): shared_decl,
    ("assign", "registers"): registers_decl,
    **{("value", name): atomic_call for name in ATOMICS},
    **{("value", name): no_value for name in _NO_VALUE},
}

"""Statements: assignments, control flow, barriers and vector accesses."""

from __future__ import annotations

import ast

from ... import dtypes
from ...dtypes import DType
from .. import ir, lang
from .._frontend import DeviceFunction
from ._calls import ATOMICS, call_function, function_return
from ._expressions import (
    arithmetic,
    array_index,
    array_param,
    bool_condition,
    integer_index,
    strided_index,
)
from ._lowerer import (
    ARITH,
    RESERVED,
    ExprResult,
    Lowerer,
    Table,
    Untyped,
    compile_time_int,
    type_name,
)


def lower_pass(lw: Lowerer, node: ast.Pass) -> list[ir.Stmt]:
    return []


def lower_expression_statement(lw: Lowerer, node: ast.Expr) -> list[ir.Stmt]:
    """A call as a statement (a K statement such as ``K.sync_cube()``, a device function) or a
    docstring; any other expression statement is refused."""
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return []  # docstring or comment string
    call = node.value
    if isinstance(call, ast.Call):
        runtime = isinstance(call.func, ast.Name) and lw.is_runtime_name(call.func.id)
        fn = None if runtime else lw.static(call.func)
        handler = lw.call_handler("statement", fn)
        if handler is not None:
            lowered: list[ir.Stmt] = handler(lw, node, call)
            return lowered
        if isinstance(fn, DeviceFunction):
            call_function(lw, call, fn)
            return []
        lw.expr(call)  # a call of anything but a K function: says calling it fails
    raise lw.error(
        node,
        "an expression statement has no effect in a kernel; assign it to "
        "a local or store it into an array",
    )


def lower_return(lw: Lowerer, node: ast.Return) -> list[ir.Stmt]:
    if lw.frame is not None:
        return function_return(lw, node, lw.frame)
    if node.value is not None:
        raise lw.error(
            node,
            "kernels return nothing; write results into an output array and use a bare 'return'",
        )
    return [ir.Return(line=lw.line(node))]


def lower_break(lw: Lowerer, node: ast.Break) -> list[ir.Stmt]:
    return [ir.Break(line=lw.line(node))]


def lower_continue(lw: Lowerer, node: ast.Continue) -> list[ir.Stmt]:
    return [ir.Continue(line=lw.line(node))]


def assign_local(
    lw: Lowerer,
    node: ast.AST,
    name: str,
    value: ExprResult,
    value_node: ast.AST,
    declared: DType | None = None,
) -> ir.Stmt:
    if lw.is_fragment(name):
        raise lw.error(node, f"{name!r} is a matrix fragment; fill, load or mma into it instead")
    if name in lw.params:
        raise lw.error(
            node,
            f"parameter {name!r} is read-only; copy it into a local "
            "(or store into an array element)",
        )
    if name in lw.constants:
        raise lw.error(node, f"constant {name!r} is read-only")
    if name in lw.loop_vars:
        raise lw.error(
            node,
            f"the loop variable {name!r} cannot be assigned inside its loop; use another local",
        )
    if name in lw.arrays:
        raise lw.error(
            node,
            f"{name!r} is an array; store into an element ({name}[i] = ...) or use another name",
        )
    if not lw.prefix and RESERVED.match(name):
        raise lw.error(
            node,
            f"names like {name!r} (tf<digits>_...) are reserved for "
            "inlined device functions; rename the local",
        )
    known = lw.locals.get(name)
    if declared is not None and known is not None and known is not declared:
        raise lw.error(node, f"local {name!r} already has type {type_name(known)}")
    target = declared or known
    typed = lw.default(value_node, value) if target is None else None
    if target is not None:
        if isinstance(value, ir.Expr) and value.type is not target:
            raise lw.error(
                node,
                f"local {name!r} has type {type_name(target)} (a local keeps its first "
                f"type) but is assigned a {type_name(value.type)}; cast with "
                f"K.{type_name(target)}(...) or use another local",
            )
        typed = lw.materialize(value_node, value, target)
    assert typed is not None
    lw.locals.setdefault(name, typed.type)
    lw.decls.setdefault(lw.prefix + name, typed.type)
    return ir.Assign(lw.prefix + name, typed, line=lw.line(node))


def element_store(
    lw: Lowerer, node: ast.Subscript, value: ExprResult, value_node: ast.AST
) -> ir.Stmt:
    array = array_param(lw, node.value)
    index = array_index(lw, node.slice, array)
    if isinstance(value, ir.Expr) and value.type is not array.dtype:
        raise lw.error(
            node,
            f"storing a {type_name(value.type)} into {array.name!r} whose elements are "
            f"{type_name(array.dtype)}; cast with K.{type_name(array.dtype)}(...)",
        )
    if array.declared is None:
        lw.written.add(array.name)
    return ir.Store(
        array.name,
        index,
        lw.materialize(value_node, value, array.dtype),
        line=lw.line(node),
    )


def lower_assign(lw: Lowerer, node: ast.Assign) -> list[ir.Stmt]:
    """``target = value``; the value of a declaration (``K.shared``, ``K.fragment``) or of
    ``K.load4`` goes to its intrinsic's handler."""
    call = node.value
    handler = lw.call_handler("assign", lw.callee(call))
    if handler is not None:
        lowered: list[ir.Stmt] = handler(lw, node, call)
        return lowered
    return [assign_to(lw, lw.single_target(node), lw.expr(call), call)]


def vector_load(lw: Lowerer, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
    """``a, b, c, d = K.load4(x, k)``."""
    target = lw.single_target(node)
    if not isinstance(target, ast.Tuple) or len(target.elts) != ir.VECTOR_WIDTH:
        raise lw.error(target, "K.load4 gives four values: write 'a, b, c, d = K.load4(x, k)'")
    return vector_access(lw, node, call, list(target.elts))


def vector_store(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.store4(x, k, a, b, c, d)``."""
    return vector_access(lw, node, call, None)


def sync_cube(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.sync_cube()``."""
    if call.args or call.keywords:
        raise lw.error(call, "K.sync_cube() takes no arguments")
    return [ir.SyncCube(line=lw.line(node))]


def atomic_statement(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.atomic_<op>(...)`` whose old value is not used."""
    value = lw.expr(call)
    assert isinstance(value, ir.Expr)
    return [ir.Eval(value, line=lw.line(node))]


def assign_to(lw: Lowerer, target: ast.expr, value: ExprResult, value_node: ast.AST) -> ir.Stmt:
    if isinstance(target, ast.Name):
        return assign_local(lw, target, target.id, value, value_node)
    if isinstance(target, ast.Subscript):
        return element_store(lw, target, value, value_node)
    if isinstance(target, (ast.Tuple, ast.List)):
        raise lw.error(target, "tuple unpacking is not supported; assign one name per line")
    raise lw.error(target, "only locals and array elements (a[i]) can be assigned")


def lower_ann_assign(lw: Lowerer, node: ast.AnnAssign) -> list[ir.Stmt]:
    if not isinstance(node.target, ast.Name) or node.value is None:
        raise lw.error(node, "annotated assignment is 'name: K.f32 = value'")
    dtype = lw.resolve_type(node.annotation, lw.static(node.annotation))
    value = lw.expr(node.value)
    return [assign_local(lw, node, node.target.id, value, node.value, declared=dtype)]


def lower_aug_assign(lw: Lowerer, node: ast.AugAssign) -> list[ir.Stmt]:
    op = ARITH.get(type(node.op))
    if op is None or op == "pow":
        raise lw.error(node, "augmented assignment supports += -= *= /= //= %=")
    target = node.target
    if not isinstance(target, (ast.Name, ast.Subscript)):
        raise lw.error(node, "only locals and array elements (a[i]) can be updated")
    load = ast.copy_location(
        ast.Name(target.id, ast.Load())
        if isinstance(target, ast.Name)
        else ast.Subscript(target.value, target.slice, ast.Load()),
        target,
    )
    value = arithmetic(lw, node, op, lw.expr(load), lw.expr(node.value))
    return [assign_to(lw, target, value, node)]


def lower_if(lw: Lowerer, node: ast.If) -> list[ir.Stmt]:
    cond = bool_condition(lw, node.test, "'if'")
    return [ir.If(cond, lw.block(node.body), lw.block(node.orelse), line=lw.line(node))]


def lower_while(lw: Lowerer, node: ast.While) -> list[ir.Stmt]:
    if node.orelse:
        raise lw.error(node, "'while ... else' is not supported")
    lw.no_call_reason = "in a while condition (it is evaluated at every iteration)"
    try:
        cond = bool_condition(lw, node.test, "'while'")
    finally:
        lw.no_call_reason = None
    return [ir.While(cond, lw.block(node.body), line=lw.line(node))]


def lower_for(lw: Lowerer, node: ast.For) -> list[ir.Stmt]:  # noqa: C901 - the range() forms, checked in turn
    if node.orelse:
        raise lw.error(node, "'for ... else' is not supported")
    if not isinstance(node.target, ast.Name):
        raise lw.error(node.target, "the loop target must be one name: for i in range(n)")
    it = node.iter
    loop = lw.callee(it) if isinstance(it, ast.Call) else None
    if loop is not range and loop is not lang.static_range:
        raise lw.error(
            it,
            "kernels loop only over range(...) or K.static_range(...): for i in range(a, b, c)",
        )
    assert isinstance(it, ast.Call)
    unroll = loop is lang.static_range
    what = "K.static_range" if unroll else "range"
    if it.keywords or not 1 <= len(it.args) <= 3:
        raise lw.error(it, f"{what} takes 1 to 3 positional arguments")
    args = [lw.expr(a) for a in it.args]
    if unroll:
        return unrolled(lw, node, static_trips(lw, it, args))
    for arg, arg_node in zip(args, it.args, strict=True):
        if isinstance(arg, Untyped) and isinstance(arg.value, float):
            raise lw.error(
                arg_node,
                f"range needs integers, not the float {arg.value!r}; "
                "write an int, or cast: K.i32(...) truncates",
            )
    if len(args) == 1:
        args = [Untyped(0), args[0]]
    if len(args) == 2:
        args.append(Untyped(1))
    name = node.target.id
    if name in lw.params or name in lw.constants or name in lw.arrays:
        raise lw.error(node.target, f"the loop variable {name!r} shadows a parameter or an array")
    if name in lw.loop_vars:
        raise lw.error(
            node.target, f"the loop variable {name!r} is already used by an enclosing loop"
        )
    known = lw.locals.get(name)
    if known is not None:
        typed = [lw.materialize(it, a, known) for a in args]
    else:
        typed = lw.unify(it, args) or [lw.default(it, a) for a in args]
    start, stop, step = typed
    if not start.type.is_integer:
        raise lw.error(it, f"range needs integers, not {type_name(start.type)}")
    if isinstance(step, ir.Const) and step.value == 0:
        raise lw.error(it.args[2], "range step must not be zero")
    if not lw.prefix and RESERVED.match(name):
        raise lw.error(
            node.target,
            f"names like {name!r} (tf<digits>_...) are reserved "
            "for inlined device functions; rename the local",
        )
    lw.locals.setdefault(name, start.type)
    lw.decls.setdefault(lw.prefix + name, start.type)
    lw.loop_vars.append(name)
    try:
        body = lw.block(node.body)
    finally:
        lw.loop_vars.pop()
    return [ir.For(lw.prefix + name, start, stop, step, body, line=lw.line(node))]


UNROLL_MAX = 1024
"""Trips a ``K.static_range`` loop may take: the front-end unrolls it, a copy of its body per
trip."""


def static_trips(lw: Lowerer, it: ast.Call, args: list[ExprResult]) -> range:
    """The counter's values of ``K.static_range``, whose bounds are compile-time ints giving
    at most :data:`UNROLL_MAX` trips."""
    values = []
    for arg, arg_node in zip(args, it.args, strict=True):
        value = compile_time_int(arg)
        if value is None:
            raise lw.error(
                arg_node,
                "K.static_range's bounds are compile-time ints (literals, K.Const[int] "
                "parameters, module constants): the loop is unrolled; use range(...) for "
                "bounds known at run time",
            )
        values.append(value)
    if len(values) == 3 and values[2] == 0:
        raise lw.error(it.args[2], "K.static_range's step must not be zero")
    trips = range(*values)
    if len(trips) > UNROLL_MAX:
        raise lw.error(
            it,
            f"K.static_range{tuple(values)} takes {len(trips)} trips; an unrolled loop takes "
            f"at most {UNROLL_MAX}: use range(...)",
        )
    return trips


def unrolled(lw: Lowerer, node: ast.For, trips: range) -> list[ir.Stmt]:
    """``for i in K.static_range(...)``: the body once per trip, ``i`` a compile-time int in
    each (typed by the operand it meets, as a literal is). There is no loop to leave: ``break``
    and ``continue`` of this loop, and an inlined function's ``return`` in it, are refused."""
    assert isinstance(node.target, ast.Name)
    name = node.target.id
    if lw.is_runtime_name(name):
        raise lw.error(
            node.target,
            f"{name!r} is already a parameter, local, constant or array; a K.static_range "
            "counter is a compile-time int of its own name",
        )
    for leaves in loop_exits(node.body):
        if isinstance(leaves, ast.Return) and lw.frame is None:
            continue  # the kernel's return ends the unit, loop or not
        raise lw.error(
            leaves,
            f"'{type(leaves).__name__.lower()}' inside K.static_range: the loop is unrolled, so "
            "there is no loop to leave; use range(...) or guard the body with 'if'",
        )
    out: list[ir.Stmt] = []
    for value in trips:
        lw.constants[name] = Untyped(value)
        try:
            out.extend(lw.block(node.body))
        finally:
            del lw.constants[name]
    return out


def loop_exits(body: list[ast.stmt]) -> list[ast.stmt]:
    """The ``break``, ``continue`` and ``return`` statements of ``body`` that would leave its
    loop (not those of a loop nested in it, except returns)."""
    found: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.Break, ast.Continue, ast.Return)):
            found.append(stmt)
        elif isinstance(stmt, (ast.For, ast.While)):
            found += [s for s in ast.walk(stmt) if isinstance(s, ast.Return)]
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    found += loop_exits([child])
    return found


# -------------------------------------------------------- vector accesses


def vector_access(
    lw: Lowerer, node: ast.stmt, call: ast.Call, targets: list[ast.expr] | None
) -> list[ir.Stmt]:
    """``a, b, c, d = K.load4(x, k)`` (``targets``) or ``K.store4(x, k, a, b, c, d)``:
    elements ``4k .. 4k+3``. Contiguous ones (a compact view, a shared array) become one
    :class:`ir.LoadVector`/:class:`ir.StoreVector`, those of a strided 1-D view four scalar
    accesses through its stride; a non-compact view of more dimensions is refused like a
    linear index."""
    width = ir.VECTOR_WIDTH
    if call.keywords or len(call.args) != (2 if targets is not None else 2 + width):
        raise lw.error(call, "write 'a, b, c, d = K.load4(x, k)' or 'K.store4(x, k, a, b, c, d)'")
    array = array_param(lw, call.args[0])
    if array.registers is not None:
        raise lw.error(
            call.args[0],
            f"{array.name!r} is a register array: its elements are registers, not memory to "
            "read four at a time; index them one by one (r[i])",
        )
    line = lw.line(node)
    u32 = dtypes.uint32
    k = integer_index(lw, call.args[1])
    first = ir.Binary(
        "mul",
        k if k.type is u32 else ir.Cast(k, type=u32, line=line),
        ir.Const(width, type=u32, line=line),
        type=u32,
        line=line,
    )
    contiguous = array.declared is not None or array.compact
    if not contiguous and array.ndim != 1:
        raise lw.error(
            call.args[1],
            f"K.{'load4' if targets is not None else 'store4'} reads consecutive elements; "
            f"{array.name!r} is a non-compact {array.ndim}-D view in this specialization: "
            "index it element by element with one index per dimension, or pass a compact "
            "copy (backend.canonicalize(t))",
        )
    lw.inlined[0] += 1
    at = f"tf{lw.inlined[0]}_vector"
    lw.decls[at] = u32
    out: list[ir.Stmt] = [ir.Assign(at, first, line=line)]
    index = ir.Var(at, type=u32, line=line)
    element: list[ir.Expr] = [
        index
        if j == 0
        else ir.Binary("add", index, ir.Const(j, type=u32, line=line), type=u32, line=line)
        for j in range(width)
    ]
    if not contiguous:
        element = [strided_index(lw, e, array, 0, line) for e in element]
    if targets is not None:
        loads = [
            assign_to(lw, t, ir.Load(array.name, e, type=array.dtype, line=line), node)
            for t, e in zip(targets, element, strict=True)
        ]
        if not contiguous:
            return out + loads
        names = tuple(s.name for s in loads if isinstance(s, ir.Assign))
        if len(names) != width:
            raise lw.error(node, "K.load4 assigns four locals: a, b, c, d = K.load4(x, k)")
        return [*out, ir.LoadVector(array.name, index, names, line=line)]
    values = [lw.materialize(v, lw.expr(v), array.dtype) for v in call.args[2:]]
    if array.declared is None:
        lw.written.add(array.name)
    if not contiguous:
        return out + [
            ir.Store(array.name, e, v, line=line) for e, v in zip(element, values, strict=True)
        ]
    return [*out, ir.StoreVector(array.name, index, tuple(values), line=line)]


HANDLERS: Table = {
    ast.Pass: lower_pass,
    ast.Expr: lower_expression_statement,
    ast.Return: lower_return,
    ast.Break: lower_break,
    ast.Continue: lower_continue,
    ast.Assign: lower_assign,
    ast.AnnAssign: lower_ann_assign,
    ast.AugAssign: lower_aug_assign,
    ast.If: lower_if,
    ast.While: lower_while,
    ast.For: lower_for,
    ("assign", "load4"): vector_load,
    ("statement", "store4"): vector_store,
    ("statement", "sync_cube"): sync_cube,
    **{("statement", name): atomic_statement for name in ATOMICS},
}

"""Statements: blocks, assignments, control flow; the complete lowerer."""

from __future__ import annotations

import ast

from ... import dtypes
from ...dtypes import DType
from .. import ir, lang
from .._frontend import DeviceFunction
from ._base import ARITH, RESERVED, ExprResult, Untyped, type_name
from ._calls import ATOMICS, CallLowering


class Lowerer(CallLowering):
    """Type-checks one function body for fixed generics, array ranks and constants."""

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
            if isinstance(fn, lang.Intrinsic) and fn.name == "store4":
                return self.vector_access(node, call, None)
            if isinstance(fn, lang.Intrinsic) and fn.name in ATOMICS:
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
        value: ExprResult,
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
        if not self.prefix and RESERVED.match(name):
            raise self.error(
                node,
                f"names like {name!r} (tf<digits>_...) are reserved for "
                "inlined device functions; rename the local",
            )
        known = self.locals.get(name)
        if declared is not None and known is not None and known is not declared:
            raise self.error(node, f"local {name!r} already has type {type_name(known)}")
        target = declared or known
        typed = self.default(value_node, value) if target is None else None
        if target is not None:
            if isinstance(value, ir.Expr) and value.type is not target:
                raise self.error(
                    node,
                    f"local {name!r} has type {type_name(target)} (a local keeps its first "
                    f"type) but is assigned a {type_name(value.type)}; cast with "
                    f"K.{type_name(target)}(...) or use another local",
                )
            typed = self.materialize(value_node, value, target)
        assert typed is not None
        self.locals.setdefault(name, typed.type)
        self.decls.setdefault(self.prefix + name, typed.type)
        return ir.Assign(self.prefix + name, typed, line=self.line(node))

    def store(self, node: ast.Subscript, value: ExprResult, value_node: ast.AST) -> ir.Stmt:
        array = self.array_param(node.value)
        index = self.index(node.slice, array)
        if isinstance(value, ir.Expr) and value.type is not array.dtype:
            raise self.error(
                node,
                f"storing a {type_name(value.type)} into {array.name!r} whose elements are "
                f"{type_name(array.dtype)}; cast with K.{type_name(array.dtype)}(...)",
            )
        if array.shared is None:
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
            target = node.targets[0]
            if isinstance(fn, lang.Intrinsic) and fn.name == "load4":
                if not isinstance(target, ast.Tuple) or len(target.elts) != ir.VECTOR_WIDTH:
                    raise self.error(
                        target, "K.load4 gives four values: write 'a, b, c, d = K.load4(x, k)'"
                    )
                return self.vector_access(node, call, list(target.elts))
        return [self.assign_to(node.targets[0], self.expr(node.value), node.value)]

    def assign_to(self, target: ast.expr, value: ExprResult, value_node: ast.AST) -> ir.Stmt:
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
        op = ARITH.get(type(node.op))
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
            if isinstance(arg, Untyped) and isinstance(arg.value, float):
                raise self.error(
                    arg_node,
                    f"range needs integers, not the float {arg.value!r}; "
                    "write an int, or cast: K.i32(...) truncates",
                )
        if len(args) == 1:
            args = [Untyped(0), args[0]]
        if len(args) == 2:
            args.append(Untyped(1))
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
            raise self.error(it, f"range needs integers, not {type_name(start.type)}")
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(it.args[2], "range step must not be zero")
        if not self.prefix and RESERVED.match(name):
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

    # -------------------------------------------------------- vector accesses

    def vector_access(
        self, node: ast.stmt, call: ast.Call, targets: list[ast.expr] | None
    ) -> list[ir.Stmt]:
        """``a, b, c, d = K.load4(x, k)`` (``targets``) or ``K.store4(x, k, a, b, c, d)``:
        elements ``4k .. 4k+3``. Contiguous ones (a compact view, a shared array) become one
        :class:`ir.LoadVector`/:class:`ir.StoreVector`, those of a strided 1-D view four scalar
        accesses through its stride; a non-compact view of more dimensions is refused like a
        linear index."""
        width = ir.VECTOR_WIDTH
        if call.keywords or len(call.args) != (2 if targets is not None else 2 + width):
            raise self.error(
                call, "write 'a, b, c, d = K.load4(x, k)' or 'K.store4(x, k, a, b, c, d)'"
            )
        array = self.array_param(call.args[0])
        line = self.line(node)
        u32 = dtypes.uint32
        k = self.integer_index(call.args[1])
        first = ir.Binary(
            "mul",
            k if k.type is u32 else ir.Cast(k, type=u32, line=line),
            ir.Const(width, type=u32, line=line),
            type=u32,
            line=line,
        )
        contiguous = array.shared is not None or array.compact
        if not contiguous and array.ndim != 1:
            raise self.error(
                call.args[1],
                f"K.{'load4' if targets is not None else 'store4'} reads consecutive elements; "
                f"{array.name!r} is a non-compact {array.ndim}-D view in this specialization: "
                "index it element by element with one index per dimension, or pass a compact "
                "copy (backend.canonicalize(t))",
            )
        self.inlined[0] += 1
        at = f"tf{self.inlined[0]}_vector"
        self.decls[at] = u32
        out: list[ir.Stmt] = [ir.Assign(at, first, line=line)]
        index = ir.Var(at, type=u32, line=line)
        element: list[ir.Expr] = [
            index
            if j == 0
            else ir.Binary("add", index, ir.Const(j, type=u32, line=line), type=u32, line=line)
            for j in range(width)
        ]
        if not contiguous:
            element = [self.strided(e, array, 0, line) for e in element]
        if targets is not None:
            loads = [
                self.assign_to(t, ir.Load(array.name, e, type=array.dtype, line=line), node)
                for t, e in zip(targets, element, strict=True)
            ]
            if not contiguous:
                return out + loads
            names = tuple(s.name for s in loads if isinstance(s, ir.Assign))
            if len(names) != width:
                raise self.error(node, "K.load4 assigns four locals: a, b, c, d = K.load4(x, k)")
            return [*out, ir.LoadVector(array.name, index, names, line=line)]
        values = [self.materialize(v, self.expr(v), array.dtype) for v in call.args[2:]]
        if array.shared is None:
            self.written.add(array.name)
        if not contiguous:
            return out + [
                ir.Store(array.name, e, v, line=line) for e, v in zip(element, values, strict=True)
            ]
        return [*out, ir.StoreVector(array.name, index, tuple(values), line=line)]

"""Matrix fragments: ``K.fragment`` declarations and the fragment statements
(:mod:`tenferro_host.kernel.ir._matrix`), the outermost layer of the lowerer."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ... import dtypes
from ...dtypes import DType
from .. import ir, lang, lang_matrix
from .._frontend import ParsedKernel
from ._base import ArrayRef, ExprResult, Untyped, type_name
from ._statements import Lowerer

_USE_NAME = {"a": "K.MATRIX_A", "b": "K.MATRIX_B", "accumulator": "K.ACCUMULATOR"}


class MatrixLowering(Lowerer):
    """The complete lowerer: the statement layer plus warp fragments, a namespace of their own
    (a fragment is no value: only the fragment statements name it)."""

    def __init__(
        self,
        parsed: ParsedKernel,
        generics: Mapping[str, DType],
        params: tuple[ir.Param, ...],
        constants: Mapping[str, Any],
    ) -> None:
        super().__init__(parsed, generics, params, constants)
        self.fragment_types: dict[str, ir.FragmentType] = {}

    # -------------------------------------------------------- names

    def is_runtime_name(self, name: str) -> bool:
        return super().is_runtime_name(name) or name in self.fragment_types

    def expr_Name(self, node: ast.Name) -> ExprResult:
        if node.id in self.fragment_types and self.frame is None:
            raise self.error(
                node,
                f"{node.id!r} is a matrix fragment, not a value: pass it to K.fill_fragment, "
                "K.load_fragment, K.store_fragment or K.mma",
            )
        return super().expr_Name(node)

    def assign_local(
        self,
        node: ast.AST,
        name: str,
        value: ExprResult,
        value_node: ast.AST,
        declared: DType | None = None,
    ) -> ir.Stmt:
        if name in self.fragment_types and self.frame is None:
            raise self.error(
                node, f"{name!r} is a matrix fragment; fill, load or mma into it instead"
            )
        return super().assign_local(node, name, value, value_node, declared)

    def matrix_call(self, call: ast.expr) -> str | None:
        """The name of the fragment intrinsic ``call`` calls, or None."""
        if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute)):
            return None
        if isinstance(call.func, ast.Name) and self.is_runtime_name(call.func.id):
            return None
        fn = self.static(call.func)
        if not isinstance(fn, lang.Intrinsic):
            return None
        name: str = fn.name
        ours = name in (*lang_matrix.MATRIX_STATEMENTS, "fragment")
        return name if ours and fn is getattr(lang_matrix, name) else None

    # -------------------------------------------------------- statements

    def stmt_Assign(self, node: ast.Assign) -> list[ir.Stmt]:
        name = self.matrix_call(node.value)
        if name == "fragment":
            assert isinstance(node.value, ast.Call)
            return self.fragment_decl(node, node.value)
        if name is not None:
            raise self.error(node, f"K.{name}(...) is a statement; it has no value")
        return super().stmt_Assign(node)

    def stmt_Expr(self, node: ast.Expr) -> list[ir.Stmt]:
        name = self.matrix_call(node.value)
        if name is None:
            return super().stmt_Expr(node)
        call = node.value
        assert isinstance(call, ast.Call)
        if name == "fragment":
            raise self.error(node, "declare a fragment with a name: f = K.fragment(...)")
        arity = getattr(lang_matrix, name).arity
        if call.keywords or len(call.args) != arity:
            raise self.error(call, f"K.{name} takes {arity} positional arguments")
        if self.frame is not None:
            raise self.error(
                call,
                "fragments live in the kernel body: call the fragment statements there, not in "
                "a device function",
            )
        method = {
            "fill_fragment": self.fill_fragment,
            "load_fragment": self.load_fragment,
            "store_fragment": self.store_fragment,
            "mma": self.mma,
        }[name]
        return [method(call, self.line(node))]

    def fragment_decl(self, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
        """``f = K.fragment(use, T, m, n, k, layout)`` at the kernel's top level."""
        target = node.targets[0] if len(node.targets) == 1 else None
        if not isinstance(target, ast.Name):
            raise self.error(node, "assign a fragment to one name: f = K.fragment(...)")
        if self.frame is not None or id(node) not in self.top_level:
            raise self.error(
                node,
                "K.fragment(...) declares a warp's fragment once: write it at the top level of "
                "the kernel body, not inside if/for/while or a device function",
            )
        if call.keywords or len(call.args) != 6:
            raise self.error(
                call,
                "K.fragment takes (use, element type, m, n, k, layout): "
                "K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.ROW_MAJOR)",
            )
        if self.is_runtime_name(target.id):
            raise self.error(
                target, f"{target.id!r} is already a parameter, local, array or fragment"
            )
        use, layout = (self.marker(call.args[k], kind) for k, kind in ((0, "use"), (5, "layout")))
        dtype = self.resolve_type(call.args[1], self.static(call.args[1]))
        want = dtypes.dtype(ir.ELEMENT[use])
        if dtype is not want:
            raise self.error(
                call.args[1],
                f"a {_USE_NAME[use]} fragment holds {type_name(want)} (f16 x f16 -> f32 "
                f"accumulate is what every target offers), not {type_name(dtype)}",
            )
        shape = tuple(self.dimension(a) for a in call.args[2:5])
        if shape not in ir.SHAPES:
            known = ", ".join("m{}n{}k{}".format(*s) for s in ir.SHAPES)
            raise self.error(
                call,
                "m{}n{}k{} is not a fragment shape every target supports; use one of {}".format(
                    *shape, known
                ),
            )
        m, n, k = shape
        self.fragment_types[target.id] = ir.FragmentType(use, m, n, k, dtype, layout)
        return []

    def marker(self, node: ast.expr, kind: str) -> str:
        obj = self.static(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if not isinstance(obj, lang_matrix.MatrixMarker) or obj.kind != kind:
            what = (
                "K.MATRIX_A, K.MATRIX_B or K.ACCUMULATOR"
                if kind == "use"
                else "K.ROW_MAJOR or K.COL_MAJOR"
            )
            raise self.error(node, f"the fragment's {kind} is {what}, not {ast.unparse(node)}")
        return obj.value

    def dimension(self, node: ast.expr) -> int:
        value = self.expr(node)
        v = value.value if isinstance(value, (Untyped, ir.Const)) else None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise self.error(
            node, "a fragment's m, n and k are compile-time ints (literals or K.Const[int])"
        )

    def fragment(self, node: ast.expr, use: tuple[str, ...] = ir.USES) -> tuple[str, Any]:
        """The fragment ``node`` names (of one of ``use``) and its type."""
        ftype = self.fragment_types.get(node.id) if isinstance(node, ast.Name) else None
        if ftype is None:
            raise self.error(node, f"{ast.unparse(node)} is not a fragment (K.fragment(...))")
        if ftype.use not in use:
            wanted = " or ".join(_USE_NAME[u] for u in use)
            raise self.error(
                node, f"{ast.unparse(node)} is a {_USE_NAME[ftype.use]} fragment; {wanted} here"
            )
        assert isinstance(node, ast.Name)
        return node.id, ftype

    def u32(self, node: ast.expr) -> ir.Expr:
        """A start or leading dimension: an integer, as u32 (literals typed u32 at once)."""
        value = self.expr(node)
        if isinstance(value, Untyped):
            return self.materialize(node, value, dtypes.uint32)
        k = self.integer_index(node)
        return k if k.type is dtypes.uint32 else ir.Cast(k, type=dtypes.uint32, line=k.line)

    def matrix_memory(self, node: ast.expr, ftype: ir.FragmentType) -> ArrayRef:
        array = self.array_param(node)
        if array.dtype is not ftype.dtype:
            raise self.error(
                node,
                f"{array.name!r} holds {type_name(array.dtype)} but the fragment "
                f"{type_name(ftype.dtype)}; fragments load and store their own element type",
            )
        if array.shared is not None and array.shared.size_param is not None:
            raise self.error(
                node,
                f"{array.name!r} is sized at launch; fragments load and store shared arrays of "
                "a compile-time size (K.shared(T, 4096)), whose start tensor cores can rely on",
            )
        if array.shared is None and not array.compact:
            raise self.error(
                node,
                f"fragments address rows of {array.name!r} through a leading dimension; it is a "
                "non-compact view in this specialization: pass a compact copy "
                "(backend.canonicalize(t))",
            )
        return array

    def fill_fragment(self, call: ast.Call, line: int) -> ir.Stmt:
        name, ftype = self.fragment(call.args[0])
        value = self.materialize(call.args[1], self.expr(call.args[1]), ftype.dtype)
        return ir.FragmentFill(name, ftype, value, line=line)

    def load_fragment(self, call: ast.Call, line: int) -> ir.Stmt:
        name, ftype = self.fragment(call.args[0])
        array = self.matrix_memory(call.args[1], ftype)
        start, ld = self.u32(call.args[2]), self.u32(call.args[3])
        return ir.FragmentLoad(name, ftype, array.name, start, ld, line=line)

    def store_fragment(self, call: ast.Call, line: int) -> ir.Stmt:
        name, ftype = self.fragment(call.args[2], ("accumulator",))
        array = self.matrix_memory(call.args[0], ftype)
        start, ld = self.u32(call.args[1]), self.u32(call.args[3])
        if array.shared is None:
            self.written.add(array.name)
        return ir.FragmentStore(array.name, start, ld, name, ftype, line=line)

    def mma(self, call: ast.Call, line: int) -> ir.Stmt:
        d, dt = self.fragment(call.args[0], ("accumulator",))
        a, at = self.fragment(call.args[1], ("a",))
        b, bt = self.fragment(call.args[2], ("b",))
        c, ct = self.fragment(call.args[3], ("accumulator",))
        if len({(t.m, t.n, t.k) for t in (dt, at, bt, ct)}) != 1:
            raise self.error(call, "K.mma(d, a, b, c) needs four fragments of one m, n, k shape")
        return ir.Mma(d, a, b, c, dt, at, bt, ct, line=line)

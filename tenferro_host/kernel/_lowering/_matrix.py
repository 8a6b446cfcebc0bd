"""Matrix fragments: ``K.fragment`` declarations and the fragment statements
(:mod:`tenferro_host.kernel.ir._matrix`); fragments are a namespace of their own
(``Lowerer.fragment_types``)."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from functools import partial
from typing import Any

from ... import dtypes
from .. import ir, lang, lang_matrix
from ._calls import declared_shape
from ._expressions import array_param, integer_index
from ._lowerer import ArrayRef, Lowerer, Table, Untyped, compile_time_int, type_name

_USE_NAME = {"a": "K.MATRIX_A", "b": "K.MATRIX_B", "accumulator": "K.ACCUMULATOR"}


def fragment_statement(
    intrinsic: lang.Intrinsic,
    build: Callable[[Lowerer, ast.Call, int], ir.Stmt],
    lw: Lowerer,
    node: ast.Expr,
    call: ast.Call,
) -> list[ir.Stmt]:
    """A fragment statement (``intrinsic``, built by ``build``): a warp's, so in the kernel
    body, with its positional arguments."""
    if call.keywords or len(call.args) != intrinsic.arity:
        raise lw.error(call, f"K.{intrinsic.name} takes {intrinsic.arity} positional arguments")
    if lw.frame is not None:
        raise lw.error(
            call,
            "fragments live in the kernel body: call the fragment statements there, not in "
            "a device function",
        )
    return [build(lw, call, lw.line(node))]


def unnamed_fragment(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.fragment(...)`` as a statement: a declaration needs a name."""
    raise lw.error(node, "declare a fragment with a name: f = K.fragment(...)")


def statement_as_value(lw: Lowerer, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
    """``x = K.mma(...)`` (or another fragment statement): it has no value."""
    name = lw.callee(call).name
    raise lw.error(node, f"K.{name}(...) is a statement; it has no value")


def fragment_decl(lw: Lowerer, node: ast.Assign, call: ast.Call) -> list[ir.Stmt]:
    """``f = K.fragment(use, T, m, n, k, layout)`` at the kernel's top level, or an array of
    fragments with a seventh argument, its compile-time shape (``f[i, j]`` names one)."""
    target = node.targets[0] if len(node.targets) == 1 else None
    if not isinstance(target, ast.Name):
        raise lw.error(node, "assign a fragment to one name: f = K.fragment(...)")
    if lw.frame is not None or id(node) not in lw.top_level:
        raise lw.error(
            node,
            "K.fragment(...) declares a warp's fragment once: write it at the top level of "
            "the kernel body, not inside if/for/while or a device function",
        )
    if call.keywords or len(call.args) not in (6, 7):
        raise lw.error(
            call,
            "K.fragment takes (use, element type, m, n, k, layout[, count]): "
            "K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.ROW_MAJOR), or an array of "
            "fragments K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, (2, 4))",
        )
    if lw.is_runtime_name(target.id):
        raise lw.error(target, f"{target.id!r} is already a parameter, local, array or fragment")
    use, layout = (
        fragment_marker(lw, call.args[k], kind) for k, kind in ((0, "use"), (5, "layout"))
    )
    dtype = lw.resolve_type(call.args[1], lw.static(call.args[1]))
    want = dtypes.dtype(ir.ELEMENT[use])
    if dtype is not want:
        raise lw.error(
            call.args[1],
            f"a {_USE_NAME[use]} fragment holds {type_name(want)} (f16 x f16 -> f32 "
            f"accumulate is what every target offers), not {type_name(dtype)}",
        )
    shape = tuple(fragment_dimension(lw, a) for a in call.args[2:5])
    if shape not in ir.SHAPES:
        known = ", ".join("m{}n{}k{}".format(*s) for s in ir.SHAPES)
        raise lw.error(
            call,
            "m{}n{}k{} is not a fragment shape every target supports; use one of {}".format(
                *shape, known
            ),
        )
    m, n, k = shape
    ftype = ir.FragmentType(use, m, n, k, dtype, layout)
    if len(call.args) == 6:
        lw.fragment_types[target.id] = ftype
        return []
    count = declared_shape(lw, call.args[6], "fragment", ir.FRAGMENT_ARRAY_MAX)
    elements = [element_name(target.id, e) for e in range(math.prod(count))]
    for name in elements:
        if lw.is_runtime_name(name):
            raise lw.error(
                target,
                f"fragment {name!r} names an element of the array {target.id!r}; rename the "
                "one or the other",
            )
        lw.fragment_types[name] = ftype
    lw.fragment_arrays[target.id] = count
    return []


def element_name(array: str, flat: int) -> str:
    """The fragment an element of a fragment array is (column-major ``flat`` index)."""
    return f"{array}__{flat}"


def fragment_element(lw: Lowerer, node: ast.Subscript) -> str:
    """The fragment ``f[i, j]`` names: an element of a fragment array, at compile-time
    indices (literals, constants, ``K.static_range`` counters)."""
    base = node.value
    count = lw.fragment_arrays.get(base.id) if isinstance(base, ast.Name) else None
    if count is None:
        raise lw.error(node, f"{ast.unparse(base)} is not an array of fragments")
    assert isinstance(base, ast.Name)
    dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(dims) != len(count):
        raise lw.error(
            node, f"{base.id!r} is a {len(count)}-d array of fragments; give {len(count)} indices"
        )
    flat, stride = 0, 1
    for dim, extent in zip(dims, count, strict=True):
        index = compile_time_int(lw.expr(dim))
        if index is None:
            raise lw.error(
                dim,
                "fragments are registers, chosen when the kernel compiles: index an array of "
                "fragments with compile-time ints (literals, constants, K.static_range "
                "counters)",
            )
        if not 0 <= index < extent:
            raise lw.error(
                dim, f"index {index} is out of range for {base.id!r}'s dimension of {extent}"
            )
        flat, stride = flat + index * stride, stride * extent
    return element_name(base.id, flat)


def fragment_marker(lw: Lowerer, node: ast.expr, kind: str) -> str:
    obj = lw.static(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if not isinstance(obj, lang_matrix.MatrixMarker) or obj.kind != kind:
        what = (
            "K.MATRIX_A, K.MATRIX_B or K.ACCUMULATOR"
            if kind == "use"
            else "K.ROW_MAJOR or K.COL_MAJOR"
        )
        raise lw.error(node, f"the fragment's {kind} is {what}, not {ast.unparse(node)}")
    return obj.value


def fragment_dimension(lw: Lowerer, node: ast.expr) -> int:
    v = compile_time_int(lw.expr(node))
    if v is not None:
        return v
    raise lw.error(node, "a fragment's m, n and k are compile-time ints (literals or K.Const[int])")


def named_fragment(lw: Lowerer, node: ast.expr, use: tuple[str, ...] = ir.USES) -> tuple[str, Any]:
    """The fragment ``node`` names (a fragment, or an element of an array of them; of one of
    ``use``) and its type."""
    if isinstance(node, ast.Name) and node.id in lw.fragment_arrays:
        raise lw.error(
            node, f"{node.id!r} is an array of fragments: name one of them, {node.id}[i]"
        )
    name = fragment_element(lw, node) if isinstance(node, ast.Subscript) else None
    if isinstance(node, ast.Name):
        name = node.id
    ftype = lw.fragment_types.get(name) if name is not None else None
    if name is None or ftype is None:
        raise lw.error(node, f"{ast.unparse(node)} is not a fragment (K.fragment(...))")
    if ftype.use not in use:
        wanted = " or ".join(_USE_NAME[u] for u in use)
        raise lw.error(
            node, f"{ast.unparse(node)} is a {_USE_NAME[ftype.use]} fragment; {wanted} here"
        )
    return name, ftype


def u32_operand(lw: Lowerer, node: ast.expr) -> ir.Expr:
    """A start or leading dimension: an integer, as u32 (literals typed u32 at once)."""
    value = lw.expr(node)
    if isinstance(value, Untyped):
        return lw.materialize(node, value, dtypes.uint32)
    k = integer_index(lw, node)
    return k if k.type is dtypes.uint32 else ir.Cast(k, type=dtypes.uint32, line=k.line)


def matrix_memory(lw: Lowerer, node: ast.expr, ftype: ir.FragmentType) -> ArrayRef:
    array = array_param(lw, node)
    if array.dtype is not ftype.dtype:
        raise lw.error(
            node,
            f"{array.name!r} holds {type_name(array.dtype)} but the fragment "
            f"{type_name(ftype.dtype)}; fragments load and store their own element type",
        )
    if array.registers is not None:
        raise lw.error(
            node,
            f"{array.name!r} is a register array, one unit's; a fragment is the whole warp's: "
            "load and store fragments through a shared array or an array parameter",
        )
    if array.shared is not None and array.shared.size_param is not None:
        raise lw.error(
            node,
            f"{array.name!r} is sized at launch; fragments load and store shared arrays of "
            "a compile-time size (K.shared(T, 4096)), whose start tensor cores can rely on",
        )
    if array.shared is None and not array.compact:
        raise lw.error(
            node,
            f"fragments address rows of {array.name!r} through a leading dimension; it is a "
            "non-compact view in this specialization: pass a compact copy "
            "(backend.canonicalize(t))",
        )
    return array


def fill_fragment(lw: Lowerer, call: ast.Call, line: int) -> ir.Stmt:
    name, ftype = named_fragment(lw, call.args[0])
    value = lw.materialize(call.args[1], lw.expr(call.args[1]), ftype.dtype)
    return ir.FragmentFill(name, ftype, value, line=line)


def load_fragment(lw: Lowerer, call: ast.Call, line: int) -> ir.Stmt:
    name, ftype = named_fragment(lw, call.args[0])
    array = matrix_memory(lw, call.args[1], ftype)
    start, ld = u32_operand(lw, call.args[2]), u32_operand(lw, call.args[3])
    return ir.FragmentLoad(name, ftype, array.name, start, ld, line=line)


def store_fragment(lw: Lowerer, call: ast.Call, line: int) -> ir.Stmt:
    name, ftype = named_fragment(lw, call.args[2], ("accumulator",))
    array = matrix_memory(lw, call.args[0], ftype)
    start, ld = u32_operand(lw, call.args[1]), u32_operand(lw, call.args[3])
    if array.shared is None:
        lw.written.add(array.name)
    return ir.FragmentStore(array.name, start, ld, name, ftype, line=line)


def mma(lw: Lowerer, call: ast.Call, line: int) -> ir.Stmt:
    d, dt = named_fragment(lw, call.args[0], ("accumulator",))
    a, at = named_fragment(lw, call.args[1], ("a",))
    b, bt = named_fragment(lw, call.args[2], ("b",))
    c, ct = named_fragment(lw, call.args[3], ("accumulator",))
    if len({(t.m, t.n, t.k) for t in (dt, at, bt, ct)}) != 1:
        raise lw.error(call, "K.mma(d, a, b, c) needs four fragments of one m, n, k shape")
    return ir.Mma(d, a, b, c, dt, at, bt, ct, line=line)


_BUILDERS = {
    lang_matrix.fill_fragment: fill_fragment,
    lang_matrix.load_fragment: load_fragment,
    lang_matrix.store_fragment: store_fragment,
    lang_matrix.mma: mma,
}

HANDLERS: Table = {
    ("assign", "fragment"): fragment_decl,
    ("statement", "fragment"): unnamed_fragment,
    **{("assign", k.name): statement_as_value for k in _BUILDERS},
    **{
        ("statement", k.name): partial(fragment_statement, k, build)
        for k, build in _BUILDERS.items()
    },
}

"""Asynchronous copies: ``K.copy_async``, ``K.commit_copies`` and ``K.wait_copies``, each a
statement of its own (:mod:`tenferro_host.kernel.ir._copies` states the semantics)."""

from __future__ import annotations

import ast

from .. import ir
from ._expressions import array_param
from ._lowerer import Lowerer, Table, compile_time_int, type_name
from ._matrix import u32_operand


def copy_async(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.copy_async(s, at, x, start, count)``: ``count`` elements of array ``x`` from
    ``start`` into shared array ``s`` from ``at``."""
    if call.keywords or len(call.args) != 5:
        raise lw.error(call, "write K.copy_async(s, at, x, start, count): s a shared array")
    shared = array_param(lw, call.args[0])
    if shared.shared is None:
        raise lw.error(
            call.args[0],
            f"{shared.name!r} is not a shared array: an asynchronous copy fills a cube's shared "
            "array (K.shared) from an array parameter",
        )
    source = array_param(lw, call.args[2])
    if source.declared is not None:
        raise lw.error(call.args[2], f"{source.name!r} is no array parameter: copies read one")
    if not source.compact:
        raise lw.error(
            call.args[2],
            f"K.copy_async reads consecutive elements; {source.name!r} is a non-compact view in "
            "this specialization: pass a compact copy (backend.canonicalize(t))",
        )
    if source.dtype is not shared.dtype:
        raise lw.error(
            call,
            f"{source.name!r} holds {type_name(source.dtype)} and {shared.name!r} "
            f"{type_name(shared.dtype)}: a copy moves elements of one type",
        )
    n = compile_time_int(lw.expr(call.args[4]))
    if n is None or n * source.dtype.itemsize not in ir.COPY_BYTES:
        raise lw.error(
            call.args[4],
            f"a copy moves 4, 8 or 16 bytes: its count is a compile-time int giving that many "
            f"bytes of {type_name(source.dtype)}, not {ast.unparse(call.args[4])}",
        )
    at, start = u32_operand(lw, call.args[1]), u32_operand(lw, call.args[3])
    return [ir.CopyAsync(shared.name, at, source.name, start, n, line=lw.line(node))]


def commit_copies(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.commit_copies()``."""
    if call.args or call.keywords:
        raise lw.error(call, "K.commit_copies() takes no arguments")
    return [ir.CommitCopies(line=lw.line(node))]


def wait_copies(lw: Lowerer, node: ast.Expr, call: ast.Call) -> list[ir.Stmt]:
    """``K.wait_copies(n)``: ``n`` a compile-time int, the groups left in flight."""
    one = len(call.args) == 1 and not call.keywords
    n = compile_time_int(lw.expr(call.args[0])) if one else None
    if n is None or not 0 <= n <= 7:
        raise lw.error(
            call,
            "K.wait_copies(n) takes the number of newest groups left in flight, a compile-time "
            "int from 0 to 7 (cp.async.wait_group's range)",
        )
    return [ir.WaitCopies(n, line=lw.line(node))]


HANDLERS: Table = {
    ("statement", "copy_async"): copy_async,
    ("statement", "commit_copies"): commit_copies,
    ("statement", "wait_copies"): wait_copies,
}

"""Subgroup operations: ``K.subgroup_add/min/max``, shuffles and ballots (a subgroup fact is a
value, :func:`._expressions.static_value`)."""

from __future__ import annotations

import ast

from ... import dtypes
from .. import ir
from ._lowerer import Lowerer, Table, type_name

SUBGROUP_CALLS = {
    "subgroup_add": ("reduce", "add"),
    "subgroup_min": ("reduce", "min"),
    "subgroup_max": ("reduce", "max"),
    "subgroup_shuffle": ("shuffle", "index"),
    "subgroup_shuffle_xor": ("shuffle", "xor"),
    "subgroup_ballot": ("ballot", ""),
}


def subgroup_call(lw: Lowerer, node: ast.Call, name: str) -> ir.Expr:
    """``K.subgroup_<op>(...)`` (the arity already checked)."""
    kind, op = SUBGROUP_CALLS[name]
    line = lw.line(node)
    if kind == "ballot":
        cond = lw.expr(node.args[0])
        if not isinstance(cond, ir.Expr) or cond.type is not dtypes.bool_:
            raise lw.error(node, "K.subgroup_ballot(cond) needs a bool; compare explicitly")
        return ir.SubgroupBallot(cond, type=dtypes.uint32, line=line)
    value = lw.default(node.args[0], lw.expr(node.args[0]))
    if value.type.name not in ir.SUBGROUP_TYPES:
        raise lw.error(
            node,
            f"K.{name} takes an f32, i32 or u32 value (32-bit on every target), not "
            f"{type_name(value.type)}; cast with K.f32(x), K.i32(x) or K.u32(x)",
        )
    if kind == "reduce":
        return ir.SubgroupReduce(op, value, type=value.type, line=line)
    lane = lw.materialize(node.args[1], lw.expr(node.args[1]), dtypes.uint32)
    shuffle = ir.SubgroupShuffle(op, value, lane, type=value.type, line=line)
    past = ir.constant_lane_past(shuffle, ir.MAX_SUBGROUP_SIZE)
    if past is not None:
        raise lw.error(node, ir.shuffle_past_message(shuffle, past, ir.MAX_SUBGROUP_SIZE))
    return shuffle


HANDLERS: Table = {("value", name): subgroup_call for name in SUBGROUP_CALLS}

"""Subgroup operations: ``K.subgroup_add/min/max``, shuffles, ballots and the subgroup facts."""

from __future__ import annotations

import ast
from typing import Any

from ... import dtypes
from .. import ir, lang
from ._base import ExprResult, type_name
from ._expressions import ExpressionLowering

SUBGROUP_CALLS = {
    "subgroup_add": ("reduce", "add"),
    "subgroup_min": ("reduce", "min"),
    "subgroup_max": ("reduce", "max"),
    "subgroup_shuffle": ("shuffle", "index"),
    "subgroup_shuffle_xor": ("shuffle", "xor"),
    "subgroup_ballot": ("ballot", ""),
}


class SubgroupLowering(ExpressionLowering):
    """Lowers the subgroup names: a fact is a value, an operation a call."""

    def static_value(self, node: ast.expr, obj: Any) -> ExprResult:
        if isinstance(obj, lang.SubgroupFact):
            return ir.SubgroupFact(obj.name, type=dtypes.uint32, line=self.line(node))
        return super().static_value(node, obj)

    def subgroup_call(self, node: ast.Call, name: str) -> ir.Expr:
        """``K.subgroup_<op>(...)`` (the arity already checked)."""
        kind, op = SUBGROUP_CALLS[name]
        line = self.line(node)
        if kind == "ballot":
            cond = self.expr(node.args[0])
            if not isinstance(cond, ir.Expr) or cond.type is not dtypes.bool_:
                raise self.error(node, "K.subgroup_ballot(cond) needs a bool; compare explicitly")
            return ir.SubgroupBallot(cond, type=dtypes.uint32, line=line)
        value = self.default(node.args[0], self.expr(node.args[0]))
        if value.type.name not in ir.SUBGROUP_TYPES:
            raise self.error(
                node,
                f"K.{name} takes an f32, i32 or u32 value (32-bit on every target), not "
                f"{type_name(value.type)}; cast with K.f32(x), K.i32(x) or K.u32(x)",
            )
        if kind == "reduce":
            return ir.SubgroupReduce(op, value, type=value.type, line=line)
        lane = self.materialize(node.args[1], self.expr(node.args[1]), dtypes.uint32)
        shuffle = ir.SubgroupShuffle(op, value, lane, type=value.type, line=line)
        past = ir.constant_lane_past(shuffle, ir.MAX_SUBGROUP_SIZE)
        if past is not None:
            raise self.error(node, ir.shuffle_past_message(shuffle, past, ir.MAX_SUBGROUP_SIZE))
        return shuffle

"""Subgroup operations in CUDA C: a subgroup is a warp (32 units, ``SUBGROUP_SIZE`` is 32).

Every warp intrinsic names the units of the warp that exist (``tf_sg_mask``: all 32, or the
cube's last units when its size is not a multiple of 32); the interpreter's rule that every
unit takes part makes that mask the active one. Reductions are the xor butterfly of
:class:`~tenferro_host.kernel.ir.SubgroupReduce`, then lane 0's total for all lanes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tenferro_host import DslError, dtype
from tenferro_host.kernel import ir

from ._numerics import C_TYPE, SIGNED_ZERO_MIN_MAX, wrapping

WARP = 32

_PROLOGUE = (
    "const unsigned int tf_sg_lane = tf_unit_pos & 31u;",
    "const unsigned int tf_sg_n = min(32u, tf_cube_dim - (tf_unit_pos & ~31u));",
    "const unsigned int tf_sg_mask = tf_sg_n == 32u ? 0xffffffffu : ((1u << tf_sg_n) - 1u);",
)


def subgroup_prologue(kernel: ir.KernelIR) -> Iterator[str]:
    """The lane, the warp's unit count and its mask, where the kernel has subgroup nodes."""
    if ir.subgroup_nodes(kernel.body):
        yield from _PROLOGUE


def check_lanes(kernel: ir.KernelIR) -> None:
    """Refuse a shuffle whose constant lane or mask is past the warp: ``__shfl_sync`` would
    read lane ``lane % 32`` instead, a wrong answer rather than the interpreter's error."""
    found = ir.first_shuffle_past(kernel.body, WARP)
    if found is not None:
        e, past = found
        raise DslError(
            f"kernel {kernel.name!r} on cuda (subgroups are warps of {WARP}): "
            + ir.shuffle_past_message(e, past, WARP),
            filename=ir.source_file(e, kernel),
            lineno=e.line,
        )


def _combine(op: str, t: str) -> str:
    """C of ``v op w`` by the IR's rules for element type ``t`` (a dtype name)."""
    if op == "add":
        if t == "float32":
            return "__fadd_rn(v, w)"
        return wrapping("+", "v", "w", dtype(t))
    if t == "float32":
        return f"tf_f{op}f(v, w)"
    return f"{op}(v, w)"


def reduce_helper(op: str, t: str) -> tuple[str, str]:
    """The name and source of the warp reduction ``op`` over C values of dtype name ``t``."""
    ctype = C_TYPE[t]
    name = f"tf_sg_{op}_{t}"
    source = f"""
__device__ __forceinline__ {ctype} {name}(
    {ctype} v, unsigned int mask, unsigned int lane, unsigned int n) {{
#pragma unroll
    for (unsigned int o = 1u; o < {WARP}u; o <<= 1) {{
        const {ctype} w = __shfl_xor_sync(mask, v, o);
        if ((lane ^ o) < n) {{ v = {_combine(op, t)}; }}
    }}
    return __shfl_sync(mask, v, 0);
}}
"""
    return name, source


class SubgroupEmitter:
    """The subgroup half of the CUDA C emitter (mixed into it)."""

    if TYPE_CHECKING:  # the emitter's own

        def expr(self, e: ir.Expr) -> str:
            """The C of ``e``."""

        def helper(self, name: str, source: str) -> None:
            """Define a helper once."""

    def visit_SubgroupFact(self, e: ir.SubgroupFact) -> str:
        """32, or the lane from the prologue."""
        return f"{WARP}u" if e.name == "SUBGROUP_SIZE" else "tf_sg_lane"

    def visit_SubgroupReduce(self, e: ir.SubgroupReduce) -> str:
        """The butterfly helper of the op and type."""
        if e.type.is_float and e.op != "add":
            self.helper("min_max", SIGNED_ZERO_MIN_MAX)
        name, source = reduce_helper(e.op, e.type.name)
        self.helper(name, source)
        return f"{name}({self.expr(e.value)}, tf_sg_mask, tf_sg_lane, tf_sg_n)"

    def visit_SubgroupShuffle(self, e: ir.SubgroupShuffle) -> str:
        """``__shfl_sync`` or ``__shfl_xor_sync`` over the warp's units."""
        value, lane = self.expr(e.value), self.expr(e.lane)
        intrinsic = "__shfl_sync" if e.mode == "index" else "__shfl_xor_sync"
        return f"{intrinsic}(tf_sg_mask, {value}, (int)({lane}))"

    def visit_SubgroupBallot(self, e: ir.SubgroupBallot) -> str:
        """``__ballot_sync`` over the warp's units."""
        return f"__ballot_sync(tf_sg_mask, {self.expr(e.cond)})"

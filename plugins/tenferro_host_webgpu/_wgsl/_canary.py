"""The loop canary of software adapters: Mesa's llvmpipe ends every loop of an invocation once
65535 loop trips in total have run; a kernel with loops runs a short loop after its body and
flags a cut one, so the JIT session raises instead of returning a wrong result."""

from __future__ import annotations

from collections.abc import Sequence

from tenferro_host.kernel import ir

from .._uniforms import word

LOOP_CANARY_TRIPS = 8
"""Trips of the canary loop; fewer mean the driver cut the invocation's loops (more than 2, so a
compiler that peels an iteration off the loop still leaves it several to be cut)."""


def uses_loops(stmts: Sequence[ir.Stmt]) -> bool:
    """Whether a kernel body has a loop (only those get the loop canary); fragment statements
    are loops in WGSL (:mod:`._matrix`)."""
    for s in stmts:
        if isinstance(s, (ir.For, ir.While, *ir.MATRIX_STATEMENTS)):
            return True
        if isinstance(s, ir.If) and (uses_loops(s.then) or uses_loops(s.orelse)):
            return True
    return False


def canary(diag: str) -> str:
    """A loop of :data:`LOOP_CANARY_TRIPS` trips whose count the compiler cannot know; run last,
    it is cut short exactly when the driver's per-invocation loop budget ran out."""
    return (
        "fn tf_loop_canary() {\n"
        "    var trips = 0u;\n"
        # an unbounded unknown (never taken: the physical grid is not empty), so no compiler
        # unrolls the loop or folds the check below; on a condition of its own: sharing
        # tf_zero's let Mesa specialise the kernel on it, and the zeros became constants again
        f"    let want = select({LOOP_CANARY_TRIPS}u, {word(3)}, {word(4)} == 0u);\n"
        "    loop {\n"
        "        trips = trips + 1u;\n"
        "        if (trips >= want) { break; }\n"
        "    }\n"
        f"    if (trips < want) {{ {diag}[0] = 1u; }}\n"
        "}\n"
    )

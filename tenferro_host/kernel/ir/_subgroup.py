"""Subgroup nodes: the units of one subgroup (a CUDA warp, a WebGPU subgroup) exchange values
in registers. A cube's units form subgroups of ``SUBGROUP_SIZE`` consecutive units in
``UNIT_POS`` order (the last one may be partial); a subgroup operation is reached by every
unit of its subgroup or by none (the interpreter checks; GPUs give undefined values)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._node_base import Expr, Node, walk
from ._nodes import Const

SUBGROUP_FACTS = ("SUBGROUP_SIZE", "SUBGROUP_UNIT_POS")
SUBGROUP_REDUCE_OPS = ("add", "min", "max")
SUBGROUP_SHUFFLE_MODES = ("index", "xor")
SUBGROUP_TYPES = ("float32", "int32", "uint32")
"""Element types of subgroup reductions and shuffles (32-bit on every target)."""

MAX_SUBGROUP_SIZE = 128
"""The widest subgroup of any target (a WebGPU adapter's may be up to 128 units)."""

BALLOT_BITS = 32
"""``K.subgroup_ballot`` gives the 32 bits of the caller's lane group (lanes ``32k .. 32k+31``
of a subgroup wider than 32 units); on a subgroup of at most 32 units, every lane's bit."""


@dataclass(frozen=True)
class SubgroupFact(Expr):
    """``K.SUBGROUP_SIZE`` or ``K.SUBGROUP_UNIT_POS`` (:data:`SUBGROUP_FACTS`), ``u32``."""

    name: str


@dataclass(frozen=True)
class SubgroupReduce(Expr):
    """``K.subgroup_<op>(value)``: the op over the values of every unit of the subgroup, the same
    for all of them. Float ``add`` sums as the xor butterfly does (round ``o`` = 1, 2, 4 ...
    adds the value of lane ``lane ^ o`` where that lane exists; then lane 0's total for all) on
    CUDA, the interpreter and WGSL's fallback; WGSL's ``subgroupAdd`` order is the driver's.
    Float ``min``/``max`` follow :class:`Math`'s rules."""

    op: str
    value: Expr


@dataclass(frozen=True)
class SubgroupShuffle(Expr):
    """``K.subgroup_shuffle(value, lane)`` (``mode`` "index": the value of unit ``lane`` of the
    subgroup) or ``K.subgroup_shuffle_xor(value, mask)`` ("xor": of unit ``own lane ^ mask``);
    ``lane`` is u32 and must name a unit of the subgroup that takes part."""

    mode: str
    value: Expr
    lane: Expr


@dataclass(frozen=True)
class SubgroupBallot(Expr):
    """``K.subgroup_ballot(cond)``: u32, bit ``j`` set where lane ``32k + j`` of the subgroup has
    ``cond`` true, ``k`` the caller's lane // 32 (:data:`BALLOT_BITS`)."""

    cond: Expr


SUBGROUP_EXPRESSIONS: tuple[type[Expr], ...] = (
    SubgroupFact,
    SubgroupReduce,
    SubgroupShuffle,
    SubgroupBallot,
)
"""Every subgroup expression class (each visitor handles them)."""


def subgroup_nodes(nodes: Iterable[Node]) -> list[Expr]:
    """The subgroup operations in ``nodes`` and below (facts included), in walk order."""
    return [n for n in walk(nodes) if isinstance(n, SUBGROUP_EXPRESSIONS)]


def constant_lane_past(e: SubgroupShuffle, size: int) -> int | None:
    """The constant lane (``index``) or mask (``xor``) of ``e`` when it reads past a subgroup of
    ``size`` units (a power of two) from every lane, else None: what a target whose subgroups
    have at most ``size`` units refuses before the kernel runs."""
    if isinstance(e.lane, Const) and int(e.lane.value) >= size:
        return int(e.lane.value)
    return None


def first_shuffle_past(nodes: Iterable[Node], size: int) -> tuple[SubgroupShuffle, int] | None:
    """The first shuffle in ``nodes`` whose constant lane or mask is past a subgroup of
    ``size`` units (:func:`constant_lane_past`), with that constant; None if there is none."""
    for n in walk(nodes):
        if isinstance(n, SubgroupShuffle):
            past = constant_lane_past(n, size)
            if past is not None:
                return n, past
    return None


def shuffle_past_message(e: SubgroupShuffle, past: int, size: int) -> str:
    """Why a shuffle with a constant lane or mask ``past`` reads no unit of a subgroup of at
    most ``size`` units, and what to write instead (each target's refusal says it so)."""
    what = f"lane {past}" if e.mode == "index" else f"lane ^ {past}"
    return (
        f"the shuffle reads {what}, which is past every subgroup of at most {size} units: a "
        "shuffle reads a lane below K.SUBGROUP_SIZE (compute it from K.SUBGROUP_SIZE, e.g. "
        "lane % K.SUBGROUP_SIZE)"
    )

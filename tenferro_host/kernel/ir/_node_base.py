"""The bases of every IR node (a module of their own: the node modules derive from them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...dtypes import DType


@dataclass(frozen=True)
class Node:
    """Base of every IR node: where in the Python source it came from."""

    line: int = field(default=0, kw_only=True, compare=False)
    file: str = field(default="", kw_only=True, compare=False)
    """The source file of ``line`` when it is not the kernel's (an inlined device function
    from another module); empty otherwise."""


@dataclass(frozen=True)
class Expr(Node):
    """An expression; ``type`` (keyword-only) is its scalar dtype (``bool`` for comparisons)."""

    type: DType = field(kw_only=True)


@dataclass(frozen=True)
class Stmt(Node):
    """A statement."""

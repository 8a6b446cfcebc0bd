"""The bases of every IR node and the walk over any node (a module of their own: the node
modules derive from it, and the matrix and subgroup helpers walk with it)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields

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


def children(node: Node) -> Iterator[Node]:
    """The nodes directly inside ``node`` (operands, conditions, bodies), in field order."""
    for f in fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, Node))


def walk(nodes: Iterable[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and below, each before its children."""
    for node in nodes:
        yield node
        yield from walk(children(node))

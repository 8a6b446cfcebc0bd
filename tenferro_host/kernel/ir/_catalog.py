"""Every IR node class, by kind: the tables each :class:`~._visit.Visitor` must cover, joined
from the node modules' own (core, matrix, subgroup, copies) in a module above them all."""

from __future__ import annotations

from ._copies import COPY_STATEMENTS
from ._matrix import MATRIX_STATEMENTS
from ._node_base import Expr, Node, Stmt
from ._nodes import CORE_EXPRESSIONS, CORE_STATEMENTS
from ._subgroup import SUBGROUP_EXPRESSIONS

STATEMENTS: tuple[type[Stmt], ...] = (*MATRIX_STATEMENTS, *COPY_STATEMENTS, *CORE_STATEMENTS)
"""Every statement class (what a :class:`Visitor` handles)."""

EXPRESSIONS: tuple[type[Expr], ...] = (*CORE_EXPRESSIONS, *SUBGROUP_EXPRESSIONS)
"""Every expression class (what a :class:`Visitor` handles)."""

NODES: tuple[type[Node], ...] = STATEMENTS + EXPRESSIONS

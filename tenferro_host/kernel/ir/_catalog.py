"""Every IR node class, by kind: the tables each :class:`~._visit.Visitor` must cover. A module
above the node modules (core, matrix, subgroup), so that none of them imports another's
table."""

from __future__ import annotations

from ._matrix import MATRIX_STATEMENTS
from ._node_base import Expr, Node, Stmt
from ._nodes import (
    ArrayLen,
    ArrayShape,
    ArrayStride,
    Assign,
    Atomic,
    AxisIndex,
    Binary,
    Break,
    Cast,
    Compare,
    Const,
    Continue,
    Eval,
    For,
    If,
    Load,
    LoadVector,
    Logical,
    Math,
    Return,
    Select,
    Store,
    StoreVector,
    SyncCube,
    ThreadIndex,
    Unary,
    Var,
    While,
)
from ._subgroup import SUBGROUP_EXPRESSIONS

STATEMENTS: tuple[type[Stmt], ...] = (
    *MATRIX_STATEMENTS,
    Assign,
    Store,
    LoadVector,
    StoreVector,
    Eval,
    SyncCube,
    If,
    For,
    While,
    Break,
    Continue,
    Return,
)
"""Every statement class (what a :class:`Visitor` handles)."""

EXPRESSIONS: tuple[type[Expr], ...] = (
    Const,
    Var,
    ThreadIndex,
    ArrayLen,
    ArrayShape,
    ArrayStride,
    AxisIndex,
    Load,
    Atomic,
    Unary,
    Binary,
    Compare,
    Logical,
    Cast,
    Math,
    Select,
    *SUBGROUP_EXPRESSIONS,
)
"""Every expression class (what a :class:`Visitor` handles)."""

NODES: tuple[type[Node], ...] = STATEMENTS + EXPRESSIONS

"""The typed IR every target consumes (CPU interpreter, CUDA C, WGSL).

The front-end produces it fully typed and resolved: generics are concrete dtypes, compile-time
constants are folded into :class:`Const`, untyped literals have a type, every binary operation
has operands of one type. Targets therefore never infer anything; see ``docs/dsl-ir.md``.

Nodes are frozen dataclasses. Every node carries ``line``, the absolute source line it came from
(for runtime diagnostics such as an out-of-bounds access reported by the interpreter), and
``file`` when that line is in another file than the kernel's (:func:`source_file`).

Every target walks the IR through one :class:`Visitor`: a subclass defines ``visit_<Node>``
for each class of :data:`STATEMENTS` and :data:`EXPRESSIONS`, and the dispatch table from node
class to method is built once, when the subclass is created (a missing method is a TypeError
there, naming the node classes; ``tests/kernel/test_ir_visitors.py`` checks every target).
Source emitters derive from :class:`SourceEmitter`, the scaffolding they share.
"""

from __future__ import annotations

from ._nodes import (
    ARITH_OPS,
    ATOMIC_OPS,
    COMPARE_OPS,
    EXPRESSIONS,
    LOGICAL_OPS,
    MATH_FUNCS,
    NODES,
    POW_SQUARING_BITS,
    POW_SQUARING_MAX,
    STATEMENTS,
    U32_MAX,
    UNARY_OPS,
    ArrayLen,
    ArrayShape,
    ArrayStride,
    Assign,
    Atomic,
    Binary,
    Break,
    Cast,
    Compare,
    Const,
    Continue,
    Eval,
    Expr,
    For,
    If,
    KernelIR,
    Load,
    Logical,
    Math,
    Node,
    Param,
    Return,
    Select,
    SharedArray,
    Stmt,
    Store,
    SyncCube,
    ThreadIndex,
    Unary,
    Var,
    While,
    check_u32_array,
    children,
    in_file,
    source_file,
    walk,
)
from ._visit import SourceEmitter, Visitor, dispatch_table

__all__ = [
    "ARITH_OPS",
    "ATOMIC_OPS",
    "COMPARE_OPS",
    "EXPRESSIONS",
    "LOGICAL_OPS",
    "MATH_FUNCS",
    "NODES",
    "POW_SQUARING_BITS",
    "POW_SQUARING_MAX",
    "STATEMENTS",
    "U32_MAX",
    "UNARY_OPS",
    "ArrayLen",
    "ArrayShape",
    "ArrayStride",
    "Assign",
    "Atomic",
    "Binary",
    "Break",
    "Cast",
    "Compare",
    "Const",
    "Continue",
    "Eval",
    "Expr",
    "For",
    "If",
    "KernelIR",
    "Load",
    "Logical",
    "Math",
    "Node",
    "Param",
    "Return",
    "Select",
    "SharedArray",
    "SourceEmitter",
    "Stmt",
    "Store",
    "SyncCube",
    "ThreadIndex",
    "Unary",
    "Var",
    "Visitor",
    "While",
    "check_u32_array",
    "children",
    "dispatch_table",
    "in_file",
    "source_file",
    "walk",
]

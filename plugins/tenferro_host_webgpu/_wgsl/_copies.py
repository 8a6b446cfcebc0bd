"""Asynchronous copies in WGSL: WebGPU has no asynchronous copy, so a copy moves its elements
at once and its commit and wait are nothing; every program the interpreter accepts (it refuses
a read of a copy not waited for) gives the same results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenferro_host import DType, uint32
from tenferro_host.kernel import ir


class CopyEmitter(ir.SourceEmitter, abstract=True):
    """The copy statements of the WGSL emitter (a base of it)."""

    if TYPE_CHECKING:

        def load(self, array: str, index: ir.Expr, dt: DType) -> str:
            """WGSL expression of element ``index`` of ``array`` (the emitter's)."""

        def store(self, array: str, index: ir.Expr, value: str, dt: DType) -> str:
            """WGSL statement storing ``value`` there (the emitter's)."""

    def visit_CopyAsync(self, s: ir.CopyAsync) -> None:
        dt = self.kernel.element_type(s.shared)
        for j in range(s.count):
            step = ir.Const(j, type=uint32, line=s.line)
            source = ir.Binary("add", s.start, step, type=uint32, line=s.line)
            target = ir.Binary("add", s.at, step, type=uint32, line=s.line)
            self.line(self.store(s.shared, target, self.load(s.array, source, dt), dt))

    def visit_CommitCopies(self, s: ir.CommitCopies) -> None:
        """Nothing: the copies are done."""

    def visit_WaitCopies(self, s: ir.WaitCopies) -> None:
        """Nothing: the copies are done."""

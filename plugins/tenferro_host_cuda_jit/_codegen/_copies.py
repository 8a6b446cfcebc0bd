"""Asynchronous copies in CUDA C: ``cp.async`` (sm_80 and later) from global into shared
memory, its commit and wait; a copy whose two addresses are not aligned to its size, or a GPU
before sm_80, copies the elements at once (the same results: the interpreter refuses every
program that could tell the two apart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenferro_host.kernel import ir

from ._numerics import C_TYPE


class CopyEmitter(ir.SourceEmitter, abstract=True):
    """The copy statements of the CUDA C emitter (a base of it)."""

    if TYPE_CHECKING:

        def memory(self, array: str) -> str:
            """C expression of an array's element 0 (the emitter's)."""

    def visit_CopyAsync(self, s: ir.CopyAsync) -> None:
        element = self.kernel.element_type(s.shared)
        ctype, nbytes = C_TYPE[element.name], s.count * element.itemsize
        n = self.temp()
        src, dst = f"tf_src{n}", f"tf_dst{n}"
        cache = "cg" if nbytes == 16 else "ca"  # (.cg, past L1, takes 16 bytes only)
        with self.braced():
            source = f"{self.memory(s.array)} + {self.expr(s.start)}"
            self.line(f"const {ctype}* const {src} = {source};")
            self.line(f"{ctype}* const {dst} = {self.memory(s.shared)} + {self.expr(s.at)};")
            self.raw("#if __CUDA_ARCH__ >= 800")
            both = f"(unsigned long long){src} | (unsigned long long){dst}"
            self.line(f"if ((({both}) & {nbytes - 1}ull) == 0ull) {{")
            with self.indented():
                self.line(
                    f'asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes};\\n" :: '
                    f'"r"((unsigned int)__cvta_generic_to_shared({dst})), "l"({src}) : "memory");'
                )
            self.line("} else")
            self.raw("#endif")
            self.line(f"for (int tf_e = 0; tf_e < {s.count}; ++tf_e) {dst}[tf_e] = {src}[tf_e];")

    def visit_CommitCopies(self, s: ir.CommitCopies) -> None:
        self.raw("#if __CUDA_ARCH__ >= 800")
        self.line('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
        self.raw("#endif")

    def visit_WaitCopies(self, s: ir.WaitCopies) -> None:
        self.raw("#if __CUDA_ARCH__ >= 800")
        self.line(f'asm volatile("cp.async.wait_group {s.pending};\\n" ::: "memory");')
        self.raw("#endif")

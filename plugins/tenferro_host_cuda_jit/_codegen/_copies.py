"""Asynchronous copies in CUDA C: ``cp.async`` (sm_80 and later) from global into shared
memory, its commit and wait; a copy whose two addresses are not aligned to its size, or a GPU
before sm_80, copies the elements at once (the same results: the interpreter refuses every
program that could tell the two apart).

The element copy is a ``__noinline__`` function: inline, NVRTC if-converts it into predicated
loads and stores that every aligned copy issues too (in the m16n8k16 GEMM's step, 104 of its
440 instructions: 64 ``LDG``, 32 ``PRMT``, 8 ``STS`` beside 8 ``LDGSTS``); called, an aligned
copy skips it with one branch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenferro_host.kernel import ir

from ._numerics import C_TYPE

#: The element copy of a copy that cannot be asynchronous, out of line (see the module).
COPY_NOW = """
template <typename T, int N>
__device__ __noinline__ void tf_copy_now(T* const dst, const T* const src) {
    for (int e = 0; e < N; ++e) dst[e] = src[e];
}
"""


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
            self.helper("copy_now", COPY_NOW)
            self.line(f"tf_copy_now<{ctype}, {s.count}>({dst}, {src});")

    def visit_CommitCopies(self, s: ir.CommitCopies) -> None:
        self.raw("#if __CUDA_ARCH__ >= 800")
        self.line('asm volatile("cp.async.commit_group;\\n" ::: "memory");')
        self.raw("#endif")

    def visit_WaitCopies(self, s: ir.WaitCopies) -> None:
        self.raw("#if __CUDA_ARCH__ >= 800")
        self.line(f'asm volatile("cp.async.wait_group {s.pending};\\n" ::: "memory");')
        self.raw("#endif")

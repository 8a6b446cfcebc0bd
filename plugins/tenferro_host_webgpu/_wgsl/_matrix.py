"""Matrix fragments in WGSL: loops over each invocation's private copy of the fragment.

WGSL has no cooperative-matrix type (the ``chromium_experimental_subgroup_matrix`` extension is
not in wgpu, nor in Mesa's llvmpipe), so every unit of a warp holds the whole fragment in a
private ``array<f32, rows * cols>`` (an f16 is exact in f32): a load reads every element, a
store writes the elements ``e`` with ``e % 32`` equal to the unit's place in its warp (the warp
stores each element once, the values being the same in every unit), and ``mma`` adds the ``k``
products to ``c`` one at a time in increasing ``k``, the interpreter's order: the results equal
the interpreter's exactly (each f16 product is exact in f32). No barrier is involved, so a
fragment statement is legal in any control flow that keeps warps whole, as on CUDA.

Loop trips (Mesa's llvmpipe cuts an invocation's loops after 65535 in total, see
:mod:`._canary`): a load runs ``rows`` trips (its columns unrolled), ``mma`` ``m * n`` (its
``k`` unrolled), a store ``rows * cols / 32``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tenferro_host.kernel import ir


def fragment_name(name: str) -> str:
    """WGSL name of fragment ``name``'s private array."""
    return "f_" + name


class MatrixEmitter(ir.SourceEmitter, abstract=True):
    """The fragment statements of the WGSL emitter (a base of it)."""

    if TYPE_CHECKING:

        def memory(self, array: str) -> str:
            """The WGSL variable holding ``array`` (the emitter's)."""

        def param_word(self, name: str, k: int) -> str:
            """Word ``k`` of parameter ``name``'s uniforms (the emitter's)."""

        def atomic_memory(self, array: str) -> bool:
            """Whether ``array``'s memory is atomic (the emitter's)."""

    def fragment_declarations(self) -> Iterator[str]:
        """Each fragment's private array, at function entry."""
        for name, t in self.kernel.fragments:
            yield f"var {fragment_name(name)}: array<f32, {t.rows * t.cols}>;"

    def element(self, s: ir.FragmentLoad | ir.FragmentStore, n: int, i: str, j: str) -> str:
        """The memory reference of element ``(i, j)`` of the fragment ``s`` moves."""
        p, q = ir.element_position(s.ftype, i, j)
        at = f"t_start{n} + {p} * t_ld{n} + {q}"
        if self.kernel.shared_array(s.array) is None:
            at = f"{self.param_word(s.array, 0)} + {at}"
        return f"{self.memory(s.array)}[{at}]"

    def read(self, s: ir.FragmentLoad, ref: str) -> str:
        """An element's value as f32; memory that atomics use holds f32 as its u32 bits."""
        return f"bitcast<f32>(atomicLoad(&{ref}))" if self.atomic_memory(s.array) else f"f32({ref})"

    def write(self, s: ir.FragmentStore, ref: str, value: str) -> str:
        """The statement storing ``value`` (f32) into ``ref``, as :meth:`read` reads it."""
        if self.atomic_memory(s.array):
            return f"atomicStore(&{ref}, bitcast<u32>({value}));"
        return f"{ref} = {value};"

    def operands(self, s: ir.FragmentLoad | ir.FragmentStore) -> int:
        """Evaluate ``start`` and ``ld`` once into ``t_start<n>``/``t_ld<n>``; ``n``."""
        n = self.temp()
        self.line(f"let t_start{n} = {self.expr(s.start)};")
        self.line(f"let t_ld{n} = {self.expr(s.ld)};")
        return n

    def visit_FragmentFill(self, s: ir.FragmentFill) -> None:
        """Every element of the private array."""
        n = self.temp()
        f = fragment_name(s.fragment)
        with self.braced():
            self.line(f"let t_fill{n} = f32({self.expr(s.value)});")
            size = s.ftype.rows * s.ftype.cols
            self.line(f"for (var t_e{n} = 0u; t_e{n} < {size}u; t_e{n} = t_e{n} + 1u) {{")
            self.line(f"    {f}[t_e{n}] = t_fill{n};")
            self.line("}")

    def visit_FragmentLoad(self, s: ir.FragmentLoad) -> None:
        """Every element, a row per trip."""
        t, f = s.ftype, fragment_name(s.fragment)
        with self.braced():
            n = self.operands(s)
            i = f"t_i{n}"
            self.line(f"for (var {i} = 0u; {i} < {t.rows}u; {i} = {i} + 1u) {{")
            with self.indented():
                for j in range(t.cols):
                    ref = self.element(s, n, i, f"{j}u")
                    self.line(f"{f}[{i} * {t.cols}u + {j}u] = {self.read(s, ref)};")
            self.line("}")

    def visit_FragmentStore(self, s: ir.FragmentStore) -> None:
        """The unit's share of the elements: ``e = unit_in_warp + 32 * trip``."""
        t, f = s.ftype, fragment_name(s.fragment)
        with self.braced():
            n = self.operands(s)
            e = f"t_e{n}"
            size = t.rows * t.cols
            self.line(f"for (var {e} = unit_index % {ir.WARP}u; {e} < {size}u; {e} = {e} + 32u) {{")
            with self.indented():
                ref = self.element(s, n, f"({e} / {t.cols}u)", f"({e} % {t.cols}u)")
                self.line(self.write(s, ref, f"{f}[{e}]"))
            self.line("}")

    def visit_Mma(self, s: ir.Mma) -> None:
        """``d[i, j] = c[i, j] + a[i, 0] * b[0, j] + ...`` in increasing ``k``, one element per
        trip (``d`` may be ``c``: each element reads its own ``c`` before it is written)."""
        m, nn, k = s.dtype.m, s.dtype.n, s.atype.k
        a, b, c, d = (fragment_name(x) for x in (s.a, s.b, s.c, s.d))
        n = self.temp()
        e = f"t_e{n}"
        self.line(f"for (var {e} = 0u; {e} < {m * nn}u; {e} = {e} + 1u) {{")
        with self.indented():
            self.line(f"let t_i{n} = {e} / {nn}u;")
            self.line(f"let t_j{n} = {e} % {nn}u;")
            self.line(f"var t_acc{n} = {c}[{e}];")
            for kk in range(k):
                self.line(
                    f"t_acc{n} = t_acc{n} + {a}[t_i{n} * {k}u + {kk}u] * {b}[{kk * nn}u + t_j{n}];"
                )
            self.line(f"{d}[{e}] = t_acc{n};")
        self.line("}")

"""Matrix fragments in CUDA C: PTX ``wmma`` instructions (tensor cores, sm_70 and later).

The generated source includes no header (NVRTC ships no ``mma.h`` here), so a fragment is the
registers PTX ``wmma`` defines for it: 8 ``unsigned int`` (f16 pairs) for an ``a``/``b``
fragment, 8 ``float`` for an f32 accumulator, for each of the shapes of
:data:`~tenferro_host.kernel.ir.SHAPES`. ``wmma.load``/``wmma.store`` take a generic address
(global or shared memory) and the leading dimension in elements; ``wmma.mma`` multiplies in
registers. Loads and stores are ``asm volatile`` with a memory clobber, so the compiler keeps
them in order with the kernel's other memory accesses and barriers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tenferro_host import UnsupportedError
from tenferro_host.kernel import Specialization, ir

REGISTERS = 8
"""Registers of every supported fragment (a/b: f16 pairs; accumulator: f32)."""

MIN_ARCH = 70
"""The first compute capability with ``wmma`` (Volta)."""

FRAGMENT_ALIGN = 32
"""Byte alignment of a shared array fragments load or store (``wmma`` reads 256-bit blocks)."""


def fragment_name(name: str) -> str:
    """C name of fragment ``name``'s registers."""
    return "f_" + name


def _shape(t: ir.FragmentType) -> str:
    return f"m{t.m}n{t.n}k{t.k}"


def _regs(names: Iterator[str]) -> str:
    return "{" + ", ".join(names) + "}"


def check_arch(spec: Specialization) -> None:
    """Refuse fragments on a device before tensor cores (its ``sm_XY`` among the
    specialization's features): a typed error naming the compute capability."""
    archs = [int(f[3:]) for f in spec.features if f.startswith("sm_") and f[3:].isdigit()]
    if spec.ir.fragments and archs and min(archs) < MIN_ARCH:
        arch = min(archs)
        raise UnsupportedError(
            f"kernel {spec.kernel_name!r} uses matrix fragments, which need tensor cores (compute "
            f"capability 7.0 or later); this device is {arch // 10}.{arch % 10}: run it on "
            "cpu or webgpu, or on a newer GPU",
            backend="cuda",
            feature="matrix fragments before sm_70",
        )


class MatrixEmitter(ir.SourceEmitter, abstract=True):
    """The fragment statements of the CUDA C emitter (a base of it)."""

    if TYPE_CHECKING:

        def memory(self, array: str) -> str:
            """C expression of an array's element 0 (the emitter's)."""

    @property
    def fragment_memory(self) -> set[str]:
        """The arrays and shared arrays fragment loads and stores address."""
        return {
            s.array
            for s in ir.walk(self.kernel.body)
            if isinstance(s, (ir.FragmentLoad, ir.FragmentStore))
        }

    def fragment_declarations(self) -> Iterator[str]:
        """The registers of each fragment, at function entry."""
        for name, t in self.kernel.fragments:
            ctype = "float" if t.use == "accumulator" else "unsigned int"
            yield f"{ctype} {fragment_name(name)}[{REGISTERS}];"

    def operands(self, name: str, constraint: str, first: int) -> tuple[str, str]:
        """``{%first, ...}`` and the asm operand list of fragment ``name``'s registers."""
        regs = _regs(f"%{first + r}" for r in range(REGISTERS))
        ops = ", ".join(f'"{constraint}"({fragment_name(name)}[{r}])' for r in range(REGISTERS))
        return regs, ops

    def address(self, array: str, start: ir.Expr) -> str:
        """The generic address of element ``start`` of ``array``, as PTX takes it."""
        return f"(unsigned long long)({self.memory(array)} + {self.expr(start)})"

    def visit_FragmentFill(self, s: ir.FragmentFill) -> None:
        """Every register of the fragment (an a/b register holds the value twice)."""
        value = self.expr(s.value)
        if s.ftype.use != "accumulator":  # two f16 bit patterns per register
            n = self.temp()
            self.line(f"const unsigned int tf_pair{n} = (unsigned int)({value});")
            value = f"(tf_pair{n} | (tf_pair{n} << 16))"
        name = fragment_name(s.fragment)
        self.line(f"for (int tf_r = 0; tf_r < {REGISTERS}; ++tf_r) {name}[tf_r] = {value};")

    def visit_FragmentLoad(self, s: ir.FragmentLoad) -> None:
        """``wmma.load.{a,b,c}`` in the fragment's layout."""
        t = s.ftype
        which = {"a": "a", "b": "b", "accumulator": "c"}[t.use]
        ptx_type = "f32" if t.use == "accumulator" else "f16"
        regs, outs = self.operands(s.fragment, "=f" if t.use == "accumulator" else "=r", 0)
        self.line(
            f'asm volatile("wmma.load.{which}.sync.aligned.{t.layout}.{_shape(t)}.{ptx_type} '
            f'{regs}, [%8], %9;" : {outs} : "l"({self.address(s.array, s.start)}), '
            f'"r"({self.expr(s.ld)}) : "memory");'
        )

    def visit_FragmentStore(self, s: ir.FragmentStore) -> None:
        """``wmma.store.d`` of an accumulator in its layout."""
        t = s.ftype
        regs, ins = self.operands(s.fragment, "f", 1)
        self.line(
            f'asm volatile("wmma.store.d.sync.aligned.{t.layout}.{_shape(t)}.f32 [%0], {regs}, '
            f'%9;" :: "l"({self.address(s.array, s.start)}), {ins}, "r"({self.expr(s.ld)}) '
            ': "memory");'
        )

    def visit_Mma(self, s: ir.Mma) -> None:
        """``d = c`` (a register copy unless they are one fragment), then ``wmma.mma`` into
        ``d`` in place."""
        d, c = fragment_name(s.d), fragment_name(s.c)
        if s.d != s.c:
            self.line(f"for (int tf_r = 0; tf_r < {REGISTERS}; ++tf_r) {d}[tf_r] = {c}[tf_r];")
        dregs, douts = self.operands(s.d, "+f", 0)
        aregs, ains = self.operands(s.a, "r", REGISTERS)
        bregs, bins = self.operands(s.b, "r", 2 * REGISTERS)
        kind = f"{s.atype.layout}.{s.btype.layout}.{_shape(s.dtype)}.f32.f32"
        self.line(
            f'asm("wmma.mma.sync.aligned.{kind} {dregs}, {aregs}, {bregs}, {dregs};" '
            f": {douts} : {ains}, {bins});"
        )

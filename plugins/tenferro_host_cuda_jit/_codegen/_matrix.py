"""Matrix fragments in CUDA C: PTX ``wmma`` instructions (tensor cores, sm_70 and later) and,
for :data:`~tenferro_host.kernel.ir.MMA_SHAPE`, ``mma.sync`` with ``ldmatrix`` (sm_80).

The generated source includes no header (NVRTC ships no ``mma.h`` here), so a fragment is the
registers PTX defines for it: for the ``wmma`` shapes 8 ``unsigned int`` (f16 pairs) for an
``a``/``b`` fragment and 8 ``float`` for an f32 accumulator; for m16n8k16 4, 2 and 4.
``wmma.load``/``wmma.store`` take an address in the array's state space (shared arrays: the
shared window) and the leading dimension in elements. An m16n8k16 ``a``/``b`` fragment loads
from a shared array with ``ldmatrix`` (``.trans`` where its layout is the other one), each
unit giving the address of one 16-byte row; from an array parameter, and for accumulators,
each unit moves its own elements, where PTX's fragment layout puts them. ``mma.sync``
multiplies in registers. Loads and stores are ``asm volatile`` with a memory clobber, so the
compiler keeps them in order with the kernel's other memory accesses and barriers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tenferro_host import UnsupportedError
from tenferro_host.kernel import Specialization, ir

from ._mma_lanes import CExpr, ldmatrix_row, position, register_element, transposed

WMMA_REGISTERS = 8
"""Registers of every ``wmma`` fragment (a/b: f16 pairs; accumulator: f32)."""

MMA_REGISTERS = {"a": 4, "b": 2, "accumulator": 4}
"""Registers of each use of an m16n8k16 fragment."""

MIN_ARCH = 70
"""The first compute capability with ``wmma`` (Volta)."""

MMA_MIN_ARCH = 80
"""The first compute capability with ``mma.sync`` m16n8k16 f32 (Ampere)."""

FRAGMENT_ALIGN = 32
"""Byte alignment of a shared array fragments load or store (``wmma`` reads 256-bit blocks)."""

LANE = CExpr("(tf_unit_pos & 31u)")
"""The unit's lane in its warp."""


def fragment_name(name: str) -> str:
    """C name of fragment ``name``'s registers."""
    return "f_" + name


def registers(t: ir.FragmentType) -> int:
    """How many registers a fragment of type ``t`` is."""
    return MMA_REGISTERS[t.use] if t.shape == ir.MMA_SHAPE else WMMA_REGISTERS


def _shape(t: ir.FragmentType) -> str:
    return f"m{t.m}n{t.n}k{t.k}"


def _regs(names: Iterator[str]) -> str:
    return "{" + ", ".join(names) + "}"


def check_arch(spec: Specialization) -> None:
    """Refuse fragments on a device before tensor cores (its ``sm_XY`` among the
    specialization's features), and m16n8k16 ones before Ampere: a typed error naming the
    compute capability."""
    archs = [int(f[3:]) for f in spec.features if f.startswith("sm_") and f[3:].isdigit()]
    if not spec.ir.fragments or not archs:
        return
    arch = min(archs)
    mma = any(t.shape == ir.MMA_SHAPE for _, t in spec.ir.fragments)
    need = MMA_MIN_ARCH if mma else MIN_ARCH
    if arch < need:
        what = "m16n8k16 fragments" if mma else "matrix fragments"
        raise UnsupportedError(
            f"kernel {spec.kernel_name!r} uses {what}, which need tensor cores of compute "
            f"capability {need // 10}.{need % 10} or later; this device is "
            f"{arch // 10}.{arch % 10}: run it on cpu or webgpu, or on a newer GPU"
            + (", or use m16n16k16 fragments (sm_70)" if mma else ""),
            backend="cuda",
            feature=f"{what} before sm_{need}",
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
            yield f"{ctype} {fragment_name(name)}[{registers(t)}];"

    def operands(
        self, name: str, t: ir.FragmentType, constraint: str, first: int
    ) -> tuple[str, str]:
        """``{%first, ...}`` and the asm operand list of fragment ``name``'s registers."""
        n = registers(t)
        regs = _regs(f"%{first + r}" for r in range(n))
        ops = ", ".join(f'"{constraint}"({fragment_name(name)}[{r}])' for r in range(n))
        return regs, ops

    def address(self, array: str, index: str) -> tuple[str, str]:
        """The asm operand of the address of element ``index`` (C) of ``array``, and its state
        space suffix: a shared array's in the shared window (32 bits), an array's generic."""
        at = f"{self.memory(array)} + {index}"
        if self.kernel.shared_array(array):
            return f'"r"((unsigned int)__cvta_generic_to_shared({at}))', ".shared"
        return f'"l"((unsigned long long)({at}))', ""

    def visit_FragmentFill(self, s: ir.FragmentFill) -> None:
        """Every register of the fragment (an a/b register holds the value twice)."""
        value = self.expr(s.value)
        if s.ftype.use != "accumulator":  # two f16 bit patterns per register
            n = self.temp()
            self.line(f"const unsigned int tf_pair{n} = (unsigned int)({value});")
            value = f"(tf_pair{n} | (tf_pair{n} << 16))"
        name = fragment_name(s.fragment)
        self.line(
            f"for (int tf_r = 0; tf_r < {registers(s.ftype)}; ++tf_r) {name}[tf_r] = {value};"
        )

    def visit_FragmentLoad(self, s: ir.FragmentLoad) -> None:
        t = s.ftype
        if t.shape == ir.MMA_SHAPE:
            if t.use == "accumulator" or not self.kernel.shared_array(s.array):
                self.elements(s, load=True)
            else:
                self.ldmatrix(s)
            return
        which = {"a": "a", "b": "b", "accumulator": "c"}[t.use]
        ptx_type = "f32" if t.use == "accumulator" else "f16"
        regs, outs = self.operands(s.fragment, t, "=f" if t.use == "accumulator" else "=r", 0)
        address, space = self.address(s.array, self.expr(s.start))
        self.line(
            f'asm volatile("wmma.load.{which}.sync.aligned.{t.layout}.{_shape(t)}{space}.'
            f'{ptx_type} {regs}, [%8], %9;" : {outs} : {address}, '
            f'"r"({self.expr(s.ld)}) : "memory");'
        )

    def visit_FragmentStore(self, s: ir.FragmentStore) -> None:
        t = s.ftype
        if t.shape == ir.MMA_SHAPE:
            self.elements(s, load=False)
            return
        regs, ins = self.operands(s.fragment, t, "f", 1)
        address, space = self.address(s.array, self.expr(s.start))
        self.line(
            f'asm volatile("wmma.store.d.sync.aligned.{t.layout}.{_shape(t)}{space}.f32 [%0], '
            f'{regs}, %9;" :: {address}, {ins}, "r"({self.expr(s.ld)}) : "memory");'
        )

    def ldmatrix(self, s: ir.FragmentLoad) -> None:
        """An m16n8k16 ``a`` (four 8 x 8 matrices) or ``b`` (two) fragment from a shared array:
        each unit hands ``ldmatrix`` the row :func:`ldmatrix_row` says, ``.trans`` where
        :func:`transposed`."""
        t = s.ftype
        n = self.temp()
        ld = f"tf_ld{n}"
        offset = ldmatrix_row(t, LANE, CExpr(ld)).text
        count = registers(t)
        regs, outs = self.operands(s.fragment, t, "=r", 0)
        trans = ".trans" if transposed(t) else ""
        with self.braced():
            self.line(f"const unsigned int {ld} = {self.expr(s.ld)};")
            address, _ = self.address(s.array, f"{self.expr(s.start)} + {offset}")
            self.line(
                f'asm volatile("ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {regs}, '
                f'[%{count}];" : {outs} : {address} : "memory");'
            )

    def elements(self, s: ir.FragmentLoad | ir.FragmentStore, load: bool) -> None:
        """Each unit moves its own elements of an m16n8k16 fragment, where PTX's register
        layout puts them (:func:`register_element`)."""
        t = s.ftype
        name = fragment_name(s.fragment)
        n = self.temp()
        base, ld = f"tf_frag{n}", f"tf_ld{n}"
        ctype = "float" if t.use == "accumulator" else "unsigned short"
        with self.braced():
            at = f"{self.memory(s.array)} + {self.expr(s.start)}"
            self.line(f"{ctype}* const {base} = ({ctype}*)({at});")
            self.line(f"const unsigned int {ld} = {self.expr(s.ld)};")
            for r in range(registers(t)):
                for half in range(1 if t.use == "accumulator" else 2):
                    i, j = register_element(t, r, half, LANE)
                    ref = f"{base}[{position(t, i, j, CExpr(ld)).text}]"
                    if t.use == "accumulator":
                        self.line(f"{name}[{r}] = {ref};" if load else f"{ref} = {name}[{r}];")
                    elif half == 0:
                        self.line(f"{name}[{r}] = (unsigned int){ref};")
                    else:
                        self.line(f"{name}[{r}] |= (unsigned int){ref} << 16;")

    def visit_Mma(self, s: ir.Mma) -> None:
        """``d = c`` (a register copy unless they are one fragment), then ``wmma.mma`` (or
        ``mma.sync`` for m16n8k16, whose registers are ``a`` by rows, ``b`` by columns) into
        ``d`` in place."""
        d, c = fragment_name(s.d), fragment_name(s.c)
        nd, na = registers(s.dtype), registers(s.atype)
        if s.d != s.c:
            self.line(f"for (int tf_r = 0; tf_r < {nd}; ++tf_r) {d}[tf_r] = {c}[tf_r];")
        dregs, douts = self.operands(s.d, s.dtype, "+f", 0)
        aregs, ains = self.operands(s.a, s.atype, "r", nd)
        bregs, bins = self.operands(s.b, s.btype, "r", nd + na)
        if s.dtype.shape == ir.MMA_SHAPE:
            instruction = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
        else:
            kind = f"{s.atype.layout}.{s.btype.layout}.{_shape(s.dtype)}.f32.f32"
            instruction = f"wmma.mma.sync.aligned.{kind}"
        self.line(
            f'asm("{instruction} {dregs}, {aregs}, {bregs}, {dregs};" : {douts} : {ains}, {bins});'
        )

"""Subgroup operations in WGSL: the ``subgroup`` feature's builtins where the device has it
(wgpu-native's name; naga takes them without an ``enable`` directive), a fallback through
workgroup memory otherwise.

Native: ``SUBGROUP_SIZE`` and ``SUBGROUP_UNIT_POS`` are the ``subgroup_size`` and
``subgroup_invocation_id`` builtins (``main`` copies them to private variables), reductions are
``subgroupAdd/Min/Max`` (the driver's summation order), shuffles ``subgroupShuffle[Xor]``, a
ballot the caller's word of ``subgroupBallot``.

Fallback: subgroups of :data:`FALLBACK_SIZE` consecutive units exchange values through the
workgroup array ``tf_sg`` between ``workgroupBarrier()`` calls; reductions run the interpreter's
butterfly, so they round as it does. Barriers need the whole workgroup: each subgroup operation
must sit in a top-level assignment, store or expression statement of the kernel, after no
``return`` (:func:`check_fallback` raises a typed error naming the line otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenferro_host import UnsupportedError
from tenferro_host.kernel import ir

from . import _numerics
from ._types import wgsl_type

FEATURE = "subgroup"
FALLBACK_SIZE = 32

PRIVATES = "var<private> tf_sg_size: u32;\nvar<private> tf_sg_lane: u32;"
NATIVE_BUILTINS = (
    ", @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32"
)


def entry_setup(native: bool) -> str:
    """What ``main`` runs before the body: the subgroup facts into their private variables."""
    if native:
        return "tf_sg_size = sg_size;\n        tf_sg_lane = sg_lane;\n        "
    return (
        f"tf_sg_size = {FALLBACK_SIZE}u;\n        tf_sg_lane = lidx % {FALLBACK_SIZE}u;\n        "
    )


_NATIVE_REDUCE = {"add": "subgroupAdd", "min": "subgroupMin", "max": "subgroupMax"}
_TOP_LEVEL = (ir.Assign, ir.Store, ir.Eval, ir.StoreVector)


def uses_subgroups(kernel: ir.KernelIR) -> bool:
    """Whether the kernel has subgroup nodes (facts included)."""
    return bool(ir.subgroup_nodes(kernel.body))


def check_fallback(kernel: ir.KernelIR) -> None:
    """Every subgroup operation can run through workgroup memory (see the module docstring)."""
    returned = False
    for s in kernel.body:
        ops = [n for n in ir.subgroup_nodes([s]) if not isinstance(n, ir.SubgroupFact)]
        nested = isinstance(s, _TOP_LEVEL) and not any(
            isinstance(n, ir.Logical) and ir.subgroup_nodes([n.rhs]) for n in ir.walk([s])
        )
        if ops and (returned or not nested):
            where = ir.source_file(ops[0], kernel)
            raise UnsupportedError(
                f"kernel {kernel.name!r} at {where}:{ops[0].line}: this adapter has no "
                f"'{FEATURE}' feature, and the fallback through workgroup memory needs every "
                "unit of the cube at each subgroup operation: write it in a statement of its own "
                "at the top level of the kernel body (not inside if/for/while, an 'and'/'or', "
                "or after a return), or use an adapter with subgroups",
                backend="webgpu",
                feature=FEATURE,
            )
        returned |= any(isinstance(n, ir.Return) for n in ir.walk([s]))
    found = ir.first_shuffle_past(kernel.body, FALLBACK_SIZE)
    if found is not None:
        e, past = found
        raise UnsupportedError(
            f"kernel {kernel.name!r} at {ir.source_file(e, kernel)}:{e.line}: this adapter has "
            f"no '{FEATURE}' feature, and the fallback's subgroups have {FALLBACK_SIZE} units: "
            + ir.shuffle_past_message(e, past, FALLBACK_SIZE),
            backend="webgpu",
            feature=FEATURE,
        )


class SubgroupEmitter:
    """The subgroup half of the WGSL emitter (mixed into it); ``native`` picks the path."""

    native: bool
    dim: tuple[int, int, int]

    if TYPE_CHECKING:  # the emitter's own

        def expr(self, e: ir.Expr) -> str:
            """The WGSL of ``e``."""

        def line(self, text: str) -> None:
            """Append a line of the body."""

        def temp(self) -> int:
            """A fresh temporary number."""

        def helper(self, name: str, source: str) -> None:
            """Define a helper once."""

    def visit_SubgroupFact(self, e: ir.SubgroupFact) -> str:
        """The private variable ``main`` set."""
        return "tf_sg_size" if e.name == "SUBGROUP_SIZE" else "tf_sg_lane"

    def visit_SubgroupReduce(self, e: ir.SubgroupReduce) -> str:
        """``subgroupAdd/Min/Max``, or the butterfly through ``tf_sg``."""
        value = self.expr(e.value)
        if self.native:
            return f"{_NATIVE_REDUCE[e.op]}({value})"
        t = wgsl_type(e.type)
        n, units = self.share(value)
        acc = f"tf_sgr{n}"
        if e.op == "add":
            combined = f"({acc} + {self.shared_value(t, 'tf_sg_base + p')})"
        elif e.type.is_float:
            for name, source in _numerics.helper(f"tf_f{e.op}_f32"):
                self.helper(name, source)
            combined = f"tf_f{e.op}_f32({acc}, {self.shared_value(t, 'tf_sg_base + p')})"
        else:
            combined = f"{e.op}({acc}, {self.shared_value(t, 'tf_sg_base + p')})"
        self.line(f"var {acc} = tf_sgv{n};")
        self.line(f"for (var o = 1u; o < {FALLBACK_SIZE}u; o = o << 1u) {{")
        self.line("    let p = tf_sg_lane ^ o;")
        self.line(f"    if (p < {units}) {{ {acc} = {combined}; }}")
        self.line("    workgroupBarrier();")
        self.line(f"    tf_sg[unit_index] = bitcast<u32>({acc});")
        self.line("    workgroupBarrier();")
        self.line("}")
        return self.shared_value(t, "tf_sg_base")

    def visit_SubgroupShuffle(self, e: ir.SubgroupShuffle) -> str:
        """``subgroupShuffle[Xor]``, or a read of ``tf_sg``."""
        value, lane = self.expr(e.value), self.expr(e.lane)
        if self.native:
            name = "subgroupShuffle" if e.mode == "index" else "subgroupShuffleXor"
            return f"{name}({value}, {lane})"
        self.share(value)
        source = lane if e.mode == "index" else f"(tf_sg_lane ^ {lane})"
        return self.shared_value(wgsl_type(e.type), f"tf_sg_base + {source}")

    def visit_SubgroupBallot(self, e: ir.SubgroupBallot) -> str:
        """The caller's word of ``subgroupBallot``, or the bits gathered from ``tf_sg``."""
        cond = self.expr(e.cond)
        if self.native:
            return f"subgroupBallot({cond})[tf_sg_lane / 32u]"
        n, units = self.share(f"select(0u, 1u, {cond})")
        self.line(f"var tf_sgb{n} = 0u;")
        self.line(f"for (var j = 0u; j < {units}; j = j + 1u) {{")
        self.line(f"    tf_sgb{n} = tf_sgb{n} | (tf_sg[tf_sg_base + j] << j);")
        self.line("}")
        return f"tf_sgb{n}"

    # -------------------------------------------------------- fallback

    def share(self, value: str) -> tuple[int, str]:
        """Lines that publish ``value`` of this unit in ``tf_sg``; the temporary's number and
        the WGSL of the subgroup's unit count."""
        n = self.temp()
        cube = self.dim[0] * self.dim[1] * self.dim[2]
        self.line(f"let tf_sgv{n} = {value};")
        self.line("workgroupBarrier();")
        self.line(f"tf_sg[unit_index] = bitcast<u32>(tf_sgv{n});")
        self.line("workgroupBarrier();")
        return n, f"min({FALLBACK_SIZE}u, {cube}u - tf_sg_base)"

    @staticmethod
    def shared_value(t: str, at: str) -> str:
        """Element ``at`` of ``tf_sg`` as WGSL type ``t``."""
        return f"bitcast<{t}>(tf_sg[{at}])"


def fallback_unit_bytes(kernel: ir.KernelIR, native: bool) -> int:
    """Workgroup memory the fallback's array ``tf_sg`` takes per unit of a cube (a u32 each);
    none with the native builtins or without subgroup operations."""
    return 0 if native or not uses_subgroups(kernel) else 4


def fallback_declarations(dim: tuple[int, int, int]) -> list[str]:
    """The workgroup array of the fallback and the base lane of the unit's subgroup."""
    cube = dim[0] * dim[1] * dim[2]
    return [f"var<workgroup> tf_sg: array<u32, {cube}>;"]

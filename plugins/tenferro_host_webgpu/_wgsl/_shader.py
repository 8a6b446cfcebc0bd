"""DSL specialization -> WGSL: one compute shader per (specialization, cube dim, aliasing).

Layout of a generated shader:

* binding 0, the uniform block (:mod:`.dispatch`): the grid, then per parameter in declaration
  order — an array's offset, length, shape and strides; a scalar's bits (f16 scalars travel as
  f32 and are converted in the shader).
* bindings 1..n, one storage buffer per distinct storage among the array arguments (views of
  one storage share a binding, so aliasing never breaks WebGPU's usage rules); read-write when a
  parameter bound to it is written. Array elements index ``buffer[offset + index]``, as every
  target does. bool elements are stored as u32.
* ``kernel_body()`` holds the kernel (``return`` ends the thread); ``main`` unfolds the grid.

Numeric rules follow the IR (see ``docs/dsl-ir.md``): integer arithmetic wraps (WGSL's runtime
semantics), integer ``//``/``%`` truncate; float comparisons, ``%`` (C ``fmod``), ``**`` (C
``pow``), float ``min``/``max`` and float->int casts (truncate, saturate, NaN -> 0) go through
the helpers of :mod:`._numerics`. Two more rules keep drivers from changing results:

* every operand of float ``+ - * / % **`` has its bits XORed with ``tf_zeroK``, zero at run
  time but unknown to the compiler (it selects on cube count K, never zero for a dispatched
  launch): no algebraic rewrite (``(a + b) - a -> b``, ``0 * x -> 0``, ``x - x -> 0``, a fused
  multiply-add) can see through an integer operation, so each operation rounds as written;
* an operation whose operands are all constants gets the same treatment, so WGSL never
  evaluates it at shader creation (where an inf/NaN or overflowing result is an error): it is
  computed at run time like on every other target.

Cooperation: a shared array is a module-scope ``var<workgroup> s_<name>: array<T, size>`` (flat;
one sized at launch gets the launch's size, a pipeline per size),
``K.sync_cube()`` is ``storageBarrier(); workgroupBarrier();`` (CUDA's ``__syncthreads`` orders
both memories). A register array is a function-scope ``var r_<name>: array<T, size>`` (zeros,
as WGSL initialises every variable). Memory used by atomics — a storage binding or a shared
array — is declared ``atomic<i32>``/``atomic<u32>`` (f32 as its ``u32`` bits) and every
access to it goes through ``atomicLoad``/``atomicStore``; i32/u32 atomics are WGSL's, f32
``add``/``min``/``max`` and every ``compare_exchange`` are compare-exchange loops
(``atomicCompareExchangeWeak`` may fail spuriously; the loop retries until the exchange
happens or the old value differs).

Subgroup operations: :mod:`._subgroup` (the ``subgroup`` feature's builtins, or a fallback
through workgroup memory).

On a software adapter (``loop_canary``), a kernel with loops runs the canary loop of
:mod:`._canary` after its body (from ``main``) and flags a cut one in the extra binding
``tf_diag`` (the JIT session reads it and raises).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tenferro_host import DType
from tenferro_host.kernel import Specialization, ir

from .._uniforms import UniformLayout, entry_point, grid_prelude, uniform_decl, word
from . import _numerics, _subgroup
from ._canary import canary, uses_loops
from ._copies import CopyEmitter
from ._matrix import MatrixEmitter
from ._types import atomic_type, literal, storage_type, value_types, wgsl_type

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "/", "mod": "%"}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_VIA_F32 = ("sqrt", "exp", "log", "sin", "cos", "tanh", "fma")
_ZERO = "tf_zero"
_LOGICAL = {"and": "&&", "or": "||"}


@dataclass(frozen=True)
class WgslProgram:
    """Generated WGSL with what launching and error reporting need."""

    source: str
    writable: tuple[bool, ...]
    dsl_lines: tuple[int, ...]
    filename: str
    kernel_name: str
    canary: bool = False  # the last binding is the loop canary's flag word
    dsl_files: tuple[str, ...] = ()  # per generated line: its DSL file when not ``filename``

    def locate(self, wgsl_line: int) -> str:
        """The DSL source location a generated line came from (for CompileError)."""
        if 1 <= wgsl_line <= len(self.dsl_lines) and self.dsl_lines[wgsl_line - 1]:
            files = self.dsl_files
            file = (files[wgsl_line - 1] if wgsl_line <= len(files) else "") or self.filename
            return (
                f" (kernel {self.kernel_name!r}, DSL source {file}:{self.dsl_lines[wgsl_line - 1]})"
            )
        return f" (kernel {self.kernel_name!r}, {self.filename})"


class _Emitter(_subgroup.SubgroupEmitter, MatrixEmitter, CopyEmitter):
    FIRST_TEMP = 1

    def __init__(
        self,
        spec: Specialization,
        dim: tuple[int, int, int],
        slots: dict[str, int],  # array param -> storage binding slot (1-based)
        layout: UniformLayout,
    ) -> None:
        super().__init__(spec.ir)
        self.spec = spec
        self.dim = dim
        self.native = _subgroup.FEATURE in spec.features
        self.slots = slots
        self.layout = layout

    # -------------------------------------------------------------- arrays and indices
    def param_word(self, name: str, k: int) -> str:
        for p, start in zip(self.spec.params, self.layout.starts, strict=True):
            if p.name == name:
                return word(start + k)
        raise KeyError(name)

    def memory(self, array: str) -> str:
        """The WGSL variable holding ``array``: its storage binding, its shared array or its
        register array."""
        if self.spec.ir.shared_array(array):
            return f"s_{array}"
        return f"r_{array}" if self.spec.ir.register_array(array) else f"b{self.slots[array]}"

    def position(self, array: str, index: ir.Expr) -> str:
        """The u32 position of element ``index`` in :meth:`memory` (views add their offset); a
        register array's constant index in bounds as its literal, which keeps the array in
        registers (hidden from the compiler like every constant, it would index it at run time)."""
        registers = self.spec.ir.register_array(array)
        if registers is not None:
            known = constant_index(index)
            if known is not None and known < registers.size:  # (WGSL refuses one past it)
                return f"{known}u"
        idx = self.expr(index)
        if index.type.name != "uint32":
            idx = f"u32({idx})"
        if registers is not None or self.spec.ir.shared_array(array):
            return idx
        return f"{self.param_word(array, 0)} + {idx}"

    def load(self, array: str, index: ir.Expr, dt: DType) -> str:
        ref = f"{self.memory(array)}[{self.position(array, index)}]"
        if self.atomic_memory(array):
            loaded = f"atomicLoad(&{ref})"
            return f"bitcast<f32>({loaded})" if dt.name == "float32" else loaded
        return f"({ref} != 0u)" if dt.name == "bool" else ref

    def store(self, array: str, index: ir.Expr, value: str, dt: DType) -> str:
        ref = f"{self.memory(array)}[{self.position(array, index)}]"
        if self.atomic_memory(array):
            bits = f"bitcast<u32>({value})" if dt.name == "float32" else value
            return f"atomicStore(&{ref}, {bits});"
        if dt.name == "bool":
            value = f"select(0u, 1u, {value})"
        return f"{ref} = {value};"

    def atomic_memory(self, array: str) -> bool:
        """Whether ``array``'s memory is declared atomic (any array bound to it is)."""
        if self.spec.ir.shared_array(array) or self.spec.ir.register_array(array):
            return array in self.spec.ir.atomic
        slot = self.slots[array]
        return any(self.slots[a] == slot for a in self.spec.ir.atomic if a in self.slots)

    def visit_Atomic(self, e: ir.Atomic) -> str:
        memory = self.memory(e.array)
        at = self.position(e.array, e.index)
        args = [self.expr(a) for a in (e.compare, e.value) if a is not None]
        t = wgsl_type(e.type)
        if t != "f32" and e.op not in ("compare_exchange",):
            builtin = {
                "add": "atomicAdd",
                "min": "atomicMin",
                "max": "atomicMax",
                "exchange": "atomicExchange",
            }[e.op]
            return f"{builtin}(&{memory}[{at}], {args[0]})"
        if t == "f32" and e.op == "exchange":
            return f"bitcast<f32>(atomicExchange(&{memory}[{at}], bitcast<u32>({args[0]})))"
        name = f"tf_atomic_{e.op}_{memory}"
        if name not in self.helpers:
            self.helper(name, _numerics.atomic_helper(name, e.op, memory, t))
            if e.op in ("min", "max"):
                for helper_name, source in _numerics.helper(f"tf_f{e.op}_f32"):
                    self.helper(helper_name, source)
        return f"{name}({', '.join([at, *args])})"

    def thread_index(self, name: str) -> str:
        dx, dy, dz = self.dim
        per_cube = dx * dy * dz
        axis = {"_X": "x", "_Y": "y", "_Z": "z"}.get(name[-2:])
        base = name[:-2] if axis else name
        if base == "ABSOLUTE_POS":
            if axis is None:
                return f"(cube_index * {per_cube}u + unit_index)"
            size = self.dim["xyz".index(axis)]
            return f"(cube_pos.{axis} * {size}u + unit_pos.{axis})"
        if base == "UNIT_POS":
            return f"unit_pos.{axis}" if axis else "unit_index"
        if base == "CUBE_POS":
            return f"cube_pos.{axis}" if axis else "cube_index"
        if base == "CUBE_DIM":
            return f"{self.dim['xyz'.index(axis)] if axis else per_cube}u"
        if base == "CUBE_COUNT":
            return f"cube_count.{axis}" if axis else "(cube_count.x * cube_count.y * cube_count.z)"
        raise ValueError(f"unknown launch index {name}")

    # -------------------------------------------------------------- expressions
    def visit_Const(self, e: ir.Const) -> str:
        return literal(e.value, e.type)

    def visit_Var(self, e: ir.Var) -> str:
        return f"v_{e.name}"

    def visit_ThreadIndex(self, e: ir.ThreadIndex) -> str:
        return self.thread_index(e.name)

    def visit_ArrayLen(self, e: ir.ArrayLen) -> str:
        return self.param_word(e.array, 1)

    def visit_ArrayShape(self, e: ir.ArrayShape) -> str:
        return self.param_word(e.array, 2 + e.axis)

    def visit_ArrayStride(self, e: ir.ArrayStride) -> str:
        p = self.spec.ir.param(e.array)
        return self.param_word(e.array, 2 + (p.ndim or 0) + e.axis)

    def visit_AxisIndex(self, e: ir.AxisIndex) -> str:
        """The index itself: only the interpreter checks it against its dimension."""
        return self.expr(e.value)

    def visit_Load(self, e: ir.Load) -> str:
        return self.load(e.array, e.index, e.type)

    def visit_Unary(self, e: ir.Unary) -> str:
        v = self.operand(e.operand)
        if e.op == "not":
            return f"(!{v})"
        return f"(0u - {v})" if e.type.name == "uint32" else f"(-{v})"

    def visit_Compare(self, e: ir.Compare) -> str:
        a, b = self.operand(e.lhs), self.operand(e.rhs)
        t = e.lhs.type
        if t.is_float:
            return self.call(f"tf_{e.op}_f32", [self.f32(a, t), self.f32(b, t)])
        return f"({a} {_COMPARE[e.op]} {b})"

    def visit_Logical(self, e: ir.Logical) -> str:
        return f"({self.expr(e.lhs)} {_LOGICAL[e.op]} {self.expr(e.rhs)})"

    def visit_Select(self, e: ir.Select) -> str:
        return f"select({self.expr(e.if_false)}, {self.expr(e.if_true)}, {self.expr(e.cond)})"

    # -------------------------------------------------------------- numeric rules
    def operand(self, e: ir.Expr, alt: int = 0) -> str:
        """``e`` as an operand; hidden from constant evaluation when it is constant."""
        code = self.expr(e)
        return self.opaque(code, e.type, alt) if _is_constant(e) else code

    def opaque(self, code: str, dt: DType, alt: int = 0) -> str:
        """``code`` with its bits XORed with a zero the compiler cannot know (see the module
        docstring): no floating-point rule sees through an integer operation. The operands of
        one operation (``alt`` 0, 1, 2) use different zeros, so no compiler sees ``x - x``."""
        z = f"{_ZERO}{alt}"
        t = wgsl_type(dt)
        if t == "f32":
            return f"bitcast<f32>(bitcast<u32>({code}) ^ {z})"
        if t == "f16":
            return f"f16(bitcast<f32>(bitcast<u32>(f32({code})) ^ {z}))"
        if t == "i32":
            return f"({code} ^ bitcast<i32>({z}))"
        if t == "u32":
            return f"({code} ^ {z})"
        return f"({code} != ({z} != 0u))"

    def call(self, name: str, args: Sequence[str]) -> str:
        for helper_name, source in _numerics.helper(name):
            self.helper(helper_name, source)
        return f"{name}({', '.join(args)})"

    @staticmethod
    def f32(code: str, dt: DType) -> str:
        """A float value as f32 (f16 helpers compute in f32: every f16 is an f32)."""
        return f"f32({code})" if dt.name == "float16" else code

    @staticmethod
    def narrow(code: str, dt: DType) -> str:
        return f"f16({code})" if dt.name == "float16" else code

    def visit_Binary(self, e: ir.Binary) -> str:
        t = e.type
        if t.is_float:
            a, b = self.opaque(self.expr(e.lhs), t, 0), self.opaque(self.expr(e.rhs), t, 1)
            if e.op in ("pow", "mod"):
                name = "tf_pow_f32" if e.op == "pow" else "tf_fmod_f32"
                return self.narrow(self.call(name, [self.f32(a, t), self.f32(b, t)]), t)
            text = f"({a} {_BINARY[e.op]} {b})"
            return f"trunc{text}" if e.op == "floordiv" else text
        a, b = self.operand(e.lhs), self.operand(e.rhs, 1)
        if e.op == "mod" and e.type.name == "int32":
            # a - (a / b) * b: NVIDIA's Vulkan driver computed i32 `%` of a negative dividend
            # as an unsigned remainder (seen on an H200, wgpu 0.32); `/` truncates correctly
            return f"({a} - ({a} / {b}) * {b})"
        return f"({a} {_BINARY[e.op]} {b})"

    def visit_Cast(self, e: ir.Cast) -> str:
        src, dst = e.value.type, e.type
        v = self.operand(e.value)
        if src is dst:
            return v
        t = wgsl_type(dst)
        if dst.name == "bool":
            if src.is_float:
                return self.call("tf_ne_f32", [self.f32(v, src), "0.0f"])
            return f"({v} != {literal(0, src)})"
        if src.name == "bool":
            return f"select({literal(0, dst)}, {literal(1, dst)}, {v})"
        if src.is_float and dst.is_integer:
            return self.call(f"tf_{t}_of_f32", [self.f32(v, src)])
        return f"{t}({v})"

    def visit_Math(self, e: ir.Math) -> str:
        if e.func == "fma":  # hidden like + - *: fma(0, x, c) must not fold to c
            args = [self.opaque(self.expr(a), e.type, k) for k, a in enumerate(e.args)]
        else:
            args = [self.operand(a, k) for k, a in enumerate(e.args)]
        if e.func in ("min", "max") and e.type.is_float:
            wide = [self.f32(a, e.type) for a in args]
            return self.narrow(self.call(f"tf_f{e.func}_f32", wide), e.type)
        if e.type.name == "float16" and e.func in _VIA_F32:
            # f16 math in f32, rounded once: drivers' f16 exp/sin/... are a few f16 ulp off,
            # and in f32 the f16 product of fma is exact (one rounding, like a fused fma)
            joined = ", ".join(self.f32(a, e.type) for a in args)
            return self.narrow(f"{e.func}({joined})", e.type)
        return f"{e.func}({', '.join(args)})"

    # -------------------------------------------------------------- statements
    def visit_Assign(self, s: ir.Assign) -> None:
        self.line(f"v_{s.name} = {self.expr(s.value)};")

    def visit_Store(self, s: ir.Store) -> None:
        self.line(self.store(s.array, s.index, self.expr(s.value), s.value.type))

    def visit_LoadVector(self, s: ir.LoadVector) -> None:
        self.statements(ir.scalar_accesses(s, self.kernel.element_type(s.array)))

    def visit_StoreVector(self, s: ir.StoreVector) -> None:
        self.statements(ir.scalar_accesses(s, self.kernel.element_type(s.array)))

    def visit_Eval(self, s: ir.Eval) -> None:
        self.line(f"_ = {self.expr(s.value)};")

    def visit_SyncCube(self, s: ir.SyncCube) -> None:
        self.line("storageBarrier(); workgroupBarrier();")

    def visit_For(self, s: ir.For) -> None:
        """C semantics: stop and step evaluated once; a zero step runs no iteration."""
        n = self.temp()
        stop, step, var = f"t_stop{n}", f"t_step{n}", f"v_{s.var}"
        zero = literal(0, s.step.type)
        with self.braced():
            self.line(f"let {stop} = {self.expr(s.stop)};")
            self.line(f"let {step} = {self.expr(s.step)};")
            self.line(f"{var} = {self.expr(s.start)};")
            if s.step.type.name == "uint32":
                cond = f"{step} != {zero} && {var} < {stop}"
            else:
                cond = f"({step} > {zero} && {var} < {stop}) || ({step} < {zero} && {var} > {stop})"
            self.line("loop {")
            with self.indented():
                self.line(f"if (!({cond})) {{ break; }}")
                self.statements(s.body)
                self.line(f"continuing {{ {var} = {var} + {step}; }}")
            self.line("}")


_RUNTIME_VALUES = (
    ir.Var,
    ir.ThreadIndex,
    ir.ArrayLen,
    ir.ArrayShape,
    ir.ArrayStride,
    ir.Load,
    ir.Atomic,
    *ir.SUBGROUP_EXPRESSIONS,
)


def constant_index(e: ir.Expr) -> int | None:
    """The value of an index made of integer constants, ``+ - *`` and integer casts (as u32,
    wrapping), else None."""
    if isinstance(e, ir.Const) and e.type.is_integer:
        return int(e.value) % 2**32
    if isinstance(e, ir.AxisIndex) or (isinstance(e, ir.Cast) and e.type.is_integer):
        return constant_index(e.value)
    if isinstance(e, ir.Binary) and e.op in ("add", "sub", "mul"):
        lhs, rhs = constant_index(e.lhs), constant_index(e.rhs)
        if lhs is None or rhs is None:
            return None
        value = lhs + rhs if e.op == "add" else lhs - rhs if e.op == "sub" else lhs * rhs
        return value % 2**32
    return None


def _is_constant(e: ir.Expr) -> bool:
    """Whether ``e`` involves no run-time value (WGSL would evaluate it at shader creation)."""
    if isinstance(e, ir.Const):
        return True
    if isinstance(e, _RUNTIME_VALUES):
        return False
    return all(isinstance(c, ir.Expr) and _is_constant(c) for c in ir.children(e))


def alias_slots(spec: Specialization, groups: Sequence[int]) -> tuple[dict[str, int], int]:
    """Binding slot (1-based) per array param from its storage group; and the slot count."""
    arrays = [p for p in spec.params if p.kind == "array"]
    order: dict[int, int] = {}
    slots = {}
    for p, g in zip(arrays, groups, strict=True):
        slots[p.name] = order.setdefault(g, len(order) + 1)
    return slots, len(order)


def generate(  # noqa: C901 - one WGSL module in order: enables, bindings, uniforms, entry, body
    spec: Specialization,
    dim: tuple[int, int, int],
    groups: Sequence[int],
    folded: bool,
    loop_canary: bool = False,
    shared_sizes: Sequence[int] = (),
) -> WgslProgram:
    """WGSL for ``spec`` with workgroup size ``dim``; ``groups[i]`` numbers the storage of the
    i-th array parameter (equal numbers: views of one storage, bound once); ``folded`` when the
    grid is dispatched folded (:mod:`.dispatch`). ``loop_canary`` (software adapters): a kernel
    with loops gets the canary and one more binding, ``WgslProgram.canary`` says which.
    ``shared_sizes``: the element counts of the shared arrays sized at launch (WGSL sizes
    workgroup arrays at pipeline creation, so each size is a pipeline of its own)."""
    k = spec.ir
    types = value_types(k)
    for dt, where in types.items():
        wgsl_type(dt, f"{where} of kernel {k.name!r}")
    slots, nslots = alias_slots(spec, groups)
    layout = UniformLayout.of(k.params)
    em = _Emitter(spec, dim, slots, layout)
    subgroups = _subgroup.uses_subgroups(k)
    if subgroups and not em.native:
        _subgroup.check_fallback(k)
        em.line("let tf_sg_base = unit_index - tf_sg_lane;")
    for alt in range(3):  # zero at run time (cube counts are never zero), unknown to compilers
        em.line(f"let {_ZERO}{alt} = select(0u, {word(3 + alt % 2)}, {word(alt)} == 0u);")
    for name, dt in k.locals:
        em.line(f"var v_{name}: {wgsl_type(dt)};")
    for r in k.registers:
        em.line(f"var r_{r.name}: array<{wgsl_type(r.dtype)}, {r.size}>;")
    for declaration in em.fragment_declarations():
        em.line(declaration)
    for p, start in zip(k.params, layout.starts, strict=True):
        if p.kind == "scalar":
            t = wgsl_type(p.dtype)
            bits = word(start)
            value = {
                "f32": f"bitcast<f32>({bits})",
                "f16": f"f16(bitcast<f32>({bits}))",
                "i32": f"bitcast<i32>({bits})",
                "u32": bits,
                "bool": f"({bits} != 0u)",
            }[t]
            em.line(f"let v_{p.name} = {value};")
    em.statements(k.body)

    written = [False] * nslots
    elem = [""] * nslots
    for p in k.params:
        if p.kind == "array":
            slot = slots[p.name]
            written[slot - 1] |= p.name in k.written
            elem[slot - 1] = (
                atomic_type(p.dtype) if em.atomic_memory(p.name) else storage_type(p.dtype)
            )
    uses_f16 = any(dt.name == "float16" for dt in types)

    head: list[str] = []
    if uses_f16:
        head.append("enable f16;")
    head += uniform_decl(layout.nwords).splitlines()
    dynamic = dict(zip(k.dynamic_shared, shared_sizes, strict=True))
    for a in k.shared:
        t = atomic_type(a.dtype) if a.name in k.atomic else storage_type(a.dtype)
        head.append(f"var<workgroup> s_{a.name}: array<{t}, {dynamic.get(a, a.size)}>;")
    for i in range(nslots):
        access = "read_write" if written[i] else "read"
        head.append(
            f"@group(0) @binding({i + 1}) var<storage, {access}> b{i + 1}: array<{elem[i]}>;"
        )
    with_canary = loop_canary and uses_loops(k.body)
    if with_canary:
        written.append(True)
        head.append(
            f"@group(0) @binding({nslots + 1}) var<storage, read_write> tf_diag: array<u32>;"
        )
    head += grid_prelude(folded).splitlines()
    if subgroups:
        head += _subgroup.PRIVATES.splitlines()
        if not em.native:
            head += _subgroup.fallback_declarations(dim)
    for helper in em.helpers.values():
        head += helper.splitlines()
    # the canary runs after the body, in main: a ``return`` in the body ends only the body
    body_call = "kernel_body();\n        tf_loop_canary()" if with_canary else "kernel_body()"
    builtins = ""
    if subgroups:
        body_call = _subgroup.entry_setup(em.native) + body_call
        builtins = _subgroup.NATIVE_BUILTINS if em.native else ""
    tail = entry_point(body_call, dim, builtins).splitlines()

    outside = (0, "")
    text: list[tuple[str, tuple[int, str]]] = [(h, outside) for h in head]
    if with_canary:
        text += [(t, outside) for t in canary("tf_diag").splitlines()]
    text.append(("fn kernel_body() {", outside))
    text += zip(em.lines, em.origins, strict=True)
    text.append(("}", outside))
    text += [(t, outside) for t in tail]
    return WgslProgram(
        source="\n".join(t for t, _ in text) + "\n",
        writable=tuple(written),
        dsl_lines=tuple(line for _, (line, _) in text),
        filename=k.filename,
        kernel_name=k.name,
        canary=with_canary,
        dsl_files=tuple(file for _, (_, file) in text),
    )


__all__ = [
    "WgslProgram",
    "alias_slots",
    "generate",
]

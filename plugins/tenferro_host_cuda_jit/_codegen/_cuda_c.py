"""DSL specialization -> CUDA C source (one ``extern "C" __global__`` kernel) and its ABI.

The source is self-contained: no ``#include``, so NVRTC needs no include path (NVRTC has no
built-in ``cuda_fp16.h`` and the pip NVRTC wheel ships no headers).

Kernel ABI (:func:`kernel_abi` lists it; the JIT provider packs arguments from it with the
public raw launch API only — refs and typed scalars):

1. For each runtime parameter of the specialization, in declaration order:

   * an array ``a`` of ndim ``n``: ``T* p_a`` (``const T*`` when the kernel never stores to it)
     and ``u64 m_offset_a``, such that the view's first element is ``p_a + m_offset_a`` — exactly
     what a raw ref carries: ``rs.tensor_strided(t)`` gives storage element 0 and ``ref.offset``
     = ``t.offset``; ``rs.tensor(t)``/``rs.tensor_mut(t)`` give the first element and offset 0.
     Then ``u32 m_len_a`` (number of elements of the view), ``u32 m_shape0_a ..
     m_shape{n-1}_a``, ``u32 m_stride0_a .. m_stride{n-1}_a`` (strides in elements);
   * a scalar: its value, typed.

2. Three hidden ``u32`` parameters: the *logical* cube count ``tf_count_x, tf_count_y,
   tf_count_z`` (``JitLaunch.count``). The physical grid (``JitLaunch.grid``) may differ when a
   count beyond the grid limits was folded: the kernel linearises ``blockIdx`` over ``gridDim``,
   surplus cubes (linear index >= the logical cube total) return at once, and
   ``CUBE_POS_*``/``ABSOLUTE_POS*`` are derived from the linear cube index and the logical
   count. The block is ``JitLaunch.dim``. The total thread count fits u32. Only a folded grid
   pays for that linearisation: :func:`generate` takes the launch's :func:`grid_shape`, and an
   unfolded grid reads ``blockIdx`` directly (a 1-D launch computes ``ABSOLUTE_POS`` as
   ``blockIdx.x * blockDim.x + threadIdx.x``, as a hand-written kernel does).

Arrays the kernel stores to (``spec.ir.written``; their pointer is not ``const``) need an
exclusive borrow; arrays only read, a shared one. Every array's pointer and offset come from
the same ref, so compact refs (offset 0) and strided refs (storage element 0) both work.

Element types: f32 ``float``, f64 ``double``, i32 ``int``, u32 ``unsigned int``, i64 ``long
long``, bool ``unsigned char`` (1 byte, 0 or 1, both in arrays and as scalar argument), f16
``unsigned short`` holding the IEEE binary16 bits (2 bytes, same bytes as ``__half``). f16
arithmetic converts to float, computes in float and rounds back to f16 after every operation
(PTX ``cvt.rn``), which is what numpy's float16 does, so results match the CPU interpreter up to
the float math functions' own ulp differences.

Numerics follow the DSL rules: signed integer ``+ - *`` and negation are computed in unsigned
arithmetic (wrap-around, no C undefined behaviour); ``//`` ``%`` truncate (C ``/ %`` for ints,
``trunc(a/b)`` and ``fmod`` for floats); ``**`` is ``pow``, small integer exponents by repeated
squaring (``tf_pow``, :data:`~tenferro_host.kernel.ir.POW_SQUARING_MAX`); float ``min``/``max`` are
``fmin``/``fmax`` with a fixed sign for two zeros (``tf_fmin``/``tf_fmax``); float ``+ - * /``
are the ``__fadd_rn``-family intrinsics, which NVRTC never contracts into a fused multiply-add
(each operation rounds, as on cpu; only ``K.fma`` fuses); float -> int casts truncate and
saturate, NaN -> 0 (the ``tf_sat_*`` helpers; a C cast out of range is undefined). Integer
division by zero is undefined on the GPU (the interpreter raises).

Cooperation: a shared array is a static ``__shared__`` array ``s_<name>`` (one sized at launch a
pointer into the launch's dynamic shared memory, see :meth:`_Emitter.shared_declarations`; a
multi-dimensional one is flat, the front-end having applied its strides), ``K.sync_cube()`` is
``__syncthreads()``; atomics are CUDA's ``atomicAdd/Min/Max/Exch/CAS`` where the type has them and
a compare-and-swap loop on the bit pattern otherwise (float ``min``/``max``/``compare_exchange``,
f64 ``exchange``). A register array is a local C array ``r_<name>`` of each thread, zeros at
entry (flat as a shared one): every index the front-end gives it from constants and unrolled
``K.static_range`` counters is a constant, so NVRTC keeps it in registers. Subgroup operations
are warp intrinsics (:mod:`._subgroup`). Every statement is preceded by a ``#line`` directive
naming the DSL source file and line, so NVRTC diagnostics point at the Python source.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tenferro_host import DType, UnsupportedError, bool_, float16, float32, float64, int64
from tenferro_host.kernel import Specialization, ir

from ._copies import CopyEmitter
from ._matrix import FRAGMENT_ALIGN, MatrixEmitter, check_arch
from ._numerics import (
    C_TYPE,
    F16_HELPERS,
    NATIVE_ATOMIC,
    ROUNDED_OP,
    SIGNED_ZERO_MIN_MAX,
    UNSIGNED,
    c_literal,
    cas_loop,
    pow_helper,
    saturating_cast,
    wrapping,
)
from ._subgroup import SubgroupEmitter, check_lanes, subgroup_prologue

HIDDEN_COUNT = ("count_x", "count_y", "count_z")


@dataclass(frozen=True)
class AbiParam:
    """One C parameter of a generated kernel.

    ``raw_type`` says how to pass it through the raw seam: ``"ptr"`` (a ``TensorRef`` /
    ``TensorMut``; 8 bytes) or the name of the raw typed scalar (``"u32"``, ``"u64"``, ``"f32"``,
    ``"f16"``, ``"bool_"`` ...). ``role``: ``"data"`` (array pointer), ``"offset"`` (u64 element
    offset of the view from the pointer), ``"len"``, ``"shape"``, ``"stride"`` (u32 metadata of
    array ``param``; ``axis`` for shape/stride), ``"value"`` (scalar parameter ``param``, of
    ``dtype``) or ``"count"`` (hidden logical cube count; ``axis`` 0/1/2 = x/y/z; ``param``
    None). ``dtype`` is the element type of a pointer or the type of a value, else None.
    """

    name: str
    raw_type: str
    role: str
    param: str | None
    axis: int | None
    dtype: DType | None
    c_decl: str
    nbytes: int


_RAW_SCALAR = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "int32": "i32",
    "uint32": "u32",
    "int64": "i64",
    "bool": "bool_",
}


def c_name(name: str, local: bool) -> str:
    """User names get a prefix so they never collide with C/CUDA keywords or our own names."""
    return ("v_" if local else "p_") + name


def meta_name(array: str, role: str, axis: int | None = None) -> str:
    """C name of an array's metadata parameter: ``m_len_x``, ``m_shape0_x``, ``m_stride1_x``."""
    return f"m_{role}{'' if axis is None else axis}_{array}"


def shared_name(array: str) -> str:
    """C name of the shared-memory array ``array`` of a cube."""
    return "s_" + array


def view(array: str) -> str:
    """C expression of a view's first element."""
    return f"({c_name(array, False)} + {meta_name(array, 'offset')})"


def kernel_symbol(spec: Specialization) -> str:
    """The extern "C" symbol of a specialization's kernel (what ``Module.function`` looks up)."""
    return "tfk_" + spec.kernel_name


def kernel_abi(spec: Specialization) -> tuple[AbiParam, ...]:
    """The generated kernel's parameter list, in order (see the module docstring)."""
    out: list[AbiParam] = []

    def meta(p: ir.Param, role: str, axis: int | None) -> AbiParam:
        name = meta_name(p.name, role, axis)
        return AbiParam(name, "u32", role, p.name, axis, None, f"unsigned int {name}", 4)

    for p in spec.params:
        name = c_name(p.name, False)
        ctype = C_TYPE[p.dtype.name]
        if p.kind == "array":
            assert p.ndim is not None
            const = "" if p.name in spec.ir.written else "const "
            out.append(
                AbiParam(name, "ptr", "data", p.name, None, p.dtype, f"{const}{ctype}* {name}", 8)
            )
            offset = meta_name(p.name, "offset")
            out.append(
                AbiParam(
                    offset, "u64", "offset", p.name, None, None, f"unsigned long long {offset}", 8
                )
            )
            out.append(meta(p, "len", None))
            out.extend(meta(p, "shape", k) for k in range(p.ndim))
            out.extend(meta(p, "stride", k) for k in range(p.ndim))
        else:
            out.append(
                AbiParam(
                    name,
                    _RAW_SCALAR[p.dtype.name],
                    "value",
                    p.name,
                    None,
                    p.dtype,
                    f"{ctype} {name}",
                    p.dtype.itemsize,
                )
            )
    for axis, hidden in enumerate(HIDDEN_COUNT):
        out.append(
            AbiParam(
                f"tf_{hidden}", "u32", "count", None, axis, None, f"unsigned int tf_{hidden}", 4
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class CudaKernelSource:
    """Generated source, its kernel symbol and its ABI."""

    symbol: str
    source: str
    abi: tuple[AbiParam, ...]


#: Grid shapes a kernel is generated for: a 1-D launch (count and dim 1-D) with no fold, any
#: unfolded launch (physical grid = logical count), and a folded one (works for every launch).
GRID_1D, GRID_DIRECT, GRID_FOLDED = "1d", "direct", "folded"

MAX_STATIC_SHARED_BYTES = ir.CUBE_SHARED_BYTES
"""Static ``__shared__`` memory a CUDA kernel may declare (more needs dynamic shared memory)."""


def grid_shape(
    count: tuple[int, int, int], grid: tuple[int, int, int], dim: tuple[int, int, int]
) -> str:
    """Which prologue a launch needs: only a folded grid pays the fold's divisions per thread."""
    if grid != count:
        return GRID_FOLDED
    if count[1] == count[2] == dim[1] == dim[2] == 1:
        return GRID_1D
    return GRID_DIRECT


def generate(spec: Specialization, grid: str = GRID_FOLDED) -> CudaKernelSource:
    """CUDA C for ``spec`` launched on a grid of shape ``grid`` (:func:`grid_shape`); the
    folded prologue is right for every launch, the others only for their own shapes."""
    shared_bytes = sum(a.size * a.dtype.itemsize for a in spec.ir.shared)
    if shared_bytes > MAX_STATIC_SHARED_BYTES:
        raise UnsupportedError(
            f"kernel {spec.kernel_name!r} declares {shared_bytes} bytes of shared arrays; CUDA "
            f"kernels hold at most {MAX_STATIC_SHARED_BYTES} bytes of static shared memory: use "
            "smaller shared arrays",
            backend="cuda",
            feature=f"static shared memory beyond {MAX_STATIC_SHARED_BYTES} bytes",
        )
    check_arch(spec)
    check_lanes(spec.ir)
    return _Emitter(spec, grid).emit()


def _c_string(text: str) -> str:
    """``text`` escaped for a C string literal (a ``#line`` file name)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ---------------------------------------------------------------- emitter


_ARITH_C = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_COMPARE_C = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_VECTOR_C = {"float32": "float4", "int32": "int4", "uint32": "uint4"}
"""The 16-byte CUDA vector type of a 4-byte element type (``K.load4``/``K.store4``)."""
_FLOAT_FN = {"sqrt", "exp", "log", "sin", "cos", "tanh", "floor", "ceil", "fma"}


class _Emitter(SubgroupEmitter, MatrixEmitter, CopyEmitter):
    def __init__(self, spec: Specialization, grid: str = "folded") -> None:
        super().__init__(spec.ir)
        self.spec = spec
        self.grid = grid
        self.locals = {name for name, _ in self.kernel.locals}

    # -------------------------------------------------------- values

    def f(self, e: ir.Expr) -> str:
        """``e`` as a C float/double computation value (f16 widened to float)."""
        code = self.expr(e)
        if e.type is float16:
            return f"tf_h2f({code})"
        return code

    def narrow(self, code: str, t: DType) -> str:
        """A float result of an f16 computation rounded back to f16."""
        return f"tf_f2h({code})" if t is float16 else code

    def fn(self, name: str, t: DType) -> str:
        """C math function name for type ``t`` (f16 computes in float)."""
        if name == "abs":
            name = "fabs"
        elif name in ("min", "max"):
            self.helper("min_max", SIGNED_ZERO_MIN_MAX)
            name = "tf_f" + name
        return name if t is float64 else name + "f"

    def visit_Const(self, e: ir.Const) -> str:
        return c_literal(e)

    def visit_Var(self, e: ir.Var) -> str:
        if e.name in self.locals:
            return c_name(e.name, True)
        name = c_name(e.name, False)
        return f"({name} != 0)" if e.type is bool_ else name

    def visit_ThreadIndex(self, e: ir.ThreadIndex) -> str:
        return "tf_" + e.name.lower()

    def visit_ArrayLen(self, e: ir.ArrayLen) -> str:
        return meta_name(e.array, "len")

    def visit_ArrayShape(self, e: ir.ArrayShape) -> str:
        return meta_name(e.array, "shape", e.axis)

    def visit_ArrayStride(self, e: ir.ArrayStride) -> str:
        return meta_name(e.array, "stride", e.axis)

    def visit_AxisIndex(self, e: ir.AxisIndex) -> str:
        """The index itself: only the interpreter checks it against its dimension."""
        return self.expr(e.value)

    def visit_Load(self, e: ir.Load) -> str:
        code = f"{self.memory(e.array)}[{self.expr(e.index)}]"
        return f"({code} != 0)" if e.type is bool_ else code

    def visit_Unary(self, e: ir.Unary) -> str:
        if e.op == "not":
            return f"(!{self.expr(e.operand)})"
        t = e.type
        if t.is_float:
            return self.narrow(f"(-{self.f(e.operand)})", t)
        ctype = C_TYPE[t.name]
        unsigned = UNSIGNED.get(t.name, ctype)
        return f"(({ctype})(({unsigned})0 - ({unsigned})({self.expr(e.operand)})))"

    def visit_Compare(self, e: ir.Compare) -> str:
        op = _COMPARE_C[e.op]
        return f"({self.f(e.lhs)} {op} {self.f(e.rhs)})"

    def visit_Logical(self, e: ir.Logical) -> str:
        op = "&&" if e.op == "and" else "||"
        return f"({self.expr(e.lhs)} {op} {self.expr(e.rhs)})"

    def visit_Select(self, e: ir.Select) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.if_true)} : {self.expr(e.if_false)})"

    def memory(self, array: str) -> str:
        """C expression of an array's element 0 (a view, a shared or a register array)."""
        if self.kernel.shared_array(array):
            return shared_name(array)
        return f"r_{array}" if self.kernel.register_array(array) else view(array)

    def visit_Atomic(self, e: ir.Atomic) -> str:
        t = e.type
        address = f"&{self.memory(e.array)}[{self.expr(e.index)}]"
        args = [self.expr(a) for a in (e.compare, e.value) if a is not None]
        if t.is_float and not (e.op == "add" or (e.op == "exchange" and t is float32)):
            name = f"tf_atomic_{e.op}_{t.name}"
            if e.op in ("min", "max"):
                self.helper("min_max", SIGNED_ZERO_MIN_MAX)  # sorts first
            self.helper(name, cas_loop(e.op, t))
            return f"{name}({', '.join([address, *args])})"
        if t is int64 and e.op != "min" and e.op != "max":
            ull = "unsigned long long"
            cast_args = ", ".join(f"({ull})({a})" for a in args)
            return f"((long long){NATIVE_ATOMIC[e.op]}(({ull}*){address}, {cast_args}))"
        return f"{NATIVE_ATOMIC[e.op]}({', '.join([address, *args])})"

    def visit_Binary(self, e: ir.Binary) -> str:
        t = e.type
        if t.is_float:
            a, b = self.f(e.lhs), self.f(e.rhs)
            if e.op in ROUNDED_OP:
                prefix = "__d" if t is float64 else "__f"
                code = f"{prefix}{ROUNDED_OP[e.op]}_rn({a}, {b})"
            elif e.op == "floordiv":
                # the quotient is rounded to t before truncation, as numpy's float16 does
                quotient = f"({a} / {b})"
                if t is float16:
                    quotient = f"tf_h2f({self.narrow(quotient, t)})"
                code = f"{self.fn('trunc', t)}({quotient})"
            elif e.op == "mod":
                code = f"{self.fn('fmod', t)}({a}, {b})"
            else:
                ctype = "double" if t is float64 else "float"
                self.helper(f"pow_{ctype}", pow_helper(ctype))
                code = f"tf_pow{'' if t is float64 else 'f'}({a}, {b})"
            return self.narrow(code, t)
        a, b = self.expr(e.lhs), self.expr(e.rhs)
        if e.op in ("floordiv", "mod"):
            return f"({a} {'/' if e.op == 'floordiv' else '%'} {b})"
        return wrapping(_ARITH_C[e.op], a, b, t)

    def visit_Cast(self, e: ir.Cast) -> str:
        src, dst = e.value.type, e.type
        if dst is bool_:
            return f"({self.f(e.value)} != 0)"
        if dst is float16:
            if src is float32:
                return f"tf_f2h({self.expr(e.value)})"
            return f"tf_d2h((double)({self.expr(e.value)}))"
        if src.is_float and dst.is_integer:
            self.helper(dst.name, saturating_cast(dst.name))
            return f"tf_sat_{dst.name}((double)({self.f(e.value)}))"
        return f"(({C_TYPE[dst.name]})({self.f(e.value)}))"

    def visit_Math(self, e: ir.Math) -> str:
        t = e.type
        if t.is_float:
            args = ", ".join(self.f(a) for a in e.args)
            return self.narrow(f"{self.fn(e.func, t)}({args})", t)
        args = ", ".join(self.expr(a) for a in e.args)
        if e.func == "abs":
            return f"{'llabs' if t is int64 else 'abs'}({args})"
        return f"{e.func}({args})"  # CUDA's integer min/max overloads

    # -------------------------------------------------------- statements

    def stmt(self, s: ir.Stmt, *args: Any) -> None:
        if s.line:
            self.raw(f'#line {s.line} "{_c_string(ir.source_file(s, self.kernel))}"')
        super().stmt(s, *args)

    def visit_Assign(self, s: ir.Assign) -> None:
        self.line(f"{c_name(s.name, True)} = {self.expr(s.value)};")

    def visit_Store(self, s: ir.Store) -> None:
        value = self.expr(s.value)
        if s.value.type is bool_:
            value = f"(unsigned char)({value})"
        self.line(f"{self.memory(s.array)}[{self.expr(s.index)}] = {value};")

    def visit_LoadVector(self, s: ir.LoadVector) -> None:
        self.vector(s, [c_name(n, True) for n in s.names])

    def visit_StoreVector(self, s: ir.StoreVector) -> None:
        self.vector(s, [self.expr(v) for v in s.values])

    def vector(self, s: ir.LoadVector | ir.StoreVector, operands: list[str]) -> None:
        """One 16-byte access where the address is 16-byte aligned (a shared array's always is, a
        view's is checked at run time), else four scalar ones (always for non-4-byte elements)."""
        element = self.kernel.element_type(s.array)
        scalar = ir.scalar_accesses(s, element)
        vector_type = _VECTOR_C.get(element.name)
        if vector_type is None:
            self.statements(scalar)
            return
        ctype = C_TYPE[element.name]
        load = isinstance(s, ir.LoadVector)
        n = self.temp()
        at = f"tf_at{n}"
        aligned = "true" if self.kernel.shared_array(s.array) else f"((size_t){at} & 15) == 0"
        const = "const " if load and s.array not in self.kernel.written else ""
        with self.braced():
            self.line(
                f"{const}{ctype}* const {at} = {self.memory(s.array)} + {self.expr(s.index)};"
            )
            self.line(f"if ({aligned}) {{")
            with self.indented():
                if load:
                    cast = f"reinterpret_cast<const {vector_type}*>({at})"
                    self.line(f"const {vector_type} tf_v{n} = *{cast};")
                    for target, lane in zip(operands, "xyzw", strict=True):
                        self.line(f"{target} = tf_v{n}.{lane};")
                else:
                    values = ", ".join(operands)
                    self.line(
                        f"*reinterpret_cast<{vector_type}*>({at}) = make_{vector_type}({values});"
                    )
            self.line("} else {")
            self.block(scalar)
            self.line("}")

    def visit_Eval(self, s: ir.Eval) -> None:
        self.line(f"(void)({self.expr(s.value)});")

    def visit_SyncCube(self, s: ir.SyncCube) -> None:
        self.line("__syncthreads();")

    def visit_For(self, s: ir.For) -> None:
        t = s.start.type
        ctype = C_TYPE[t.name]
        var = c_name(s.var, True)
        n = self.temp()
        stop, step = f"tf_stop{n}", f"tf_step{n}"
        with self.braced():
            self.line(f"const {ctype} {stop} = {self.expr(s.stop)};")
            self.line(f"const {ctype} {step} = {self.expr(s.step)};")
            if isinstance(s.step, ir.Const):
                cond = f"{var} < {stop}" if s.step.value > 0 else f"{var} > {stop}"
            elif t.category == "uint":
                cond = f"{step} > 0u && {var} < {stop}"
            else:
                cond = f"({step} > 0 && {var} < {stop}) || ({step} < 0 && {var} > {stop})"
            increment = wrapping("+", var, step, t)
            self.line(f"for ({var} = {self.expr(s.start)}; {cond}; {var} = {increment}) {{")
            self.block(s.body)
            self.line("}")

    # -------------------------------------------------------- kernel

    def prologue(self) -> Iterator[str]:
        """Cube and unit positions for the launch's grid shape (see :func:`grid_shape`): the
        linearising fold with its divisions only for a folded grid."""
        u = "const unsigned int"
        if self.grid == GRID_1D:
            yield f"{u} tf_cube = blockIdx.x;"
            yield f"{u} tf_cube_count = tf_count_x;"
            yield f"{u} tf_cube_pos_x = blockIdx.x;"
            yield f"{u} tf_cube_pos_y = 0;"
            yield f"{u} tf_cube_pos_z = 0;"
        elif self.grid == GRID_DIRECT:
            yield (
                f"{u} tf_cube = blockIdx.x + tf_count_x * (blockIdx.y + tf_count_y * blockIdx.z);"
            )
            yield f"{u} tf_cube_count = tf_count_x * tf_count_y * tf_count_z;"
            yield f"{u} tf_cube_pos_x = blockIdx.x;"
            yield f"{u} tf_cube_pos_y = blockIdx.y;"
            yield f"{u} tf_cube_pos_z = blockIdx.z;"
        else:
            yield (f"{u} tf_cube = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);")
            yield f"{u} tf_cube_count = tf_count_x * tf_count_y * tf_count_z;"
            yield "if (tf_cube >= tf_cube_count) return;"
            yield f"{u} tf_cube_pos_x = tf_cube % tf_count_x;"
            yield f"{u} tf_cube_pos_y = (tf_cube / tf_count_x) % tf_count_y;"
            yield f"{u} tf_cube_pos_z = tf_cube / (tf_count_x * tf_count_y);"
        yield f"{u} tf_cube_count_x = tf_count_x;"
        yield f"{u} tf_cube_count_y = tf_count_y;"
        yield f"{u} tf_cube_count_z = tf_count_z;"
        yield f"{u} tf_cube_pos = tf_cube;"
        if self.grid == GRID_1D:
            yield f"{u} tf_cube_dim_x = blockDim.x;"
            yield f"{u} tf_cube_dim_y = 1;"
            yield f"{u} tf_cube_dim_z = 1;"
            yield f"{u} tf_cube_dim = blockDim.x;"
            yield f"{u} tf_unit_pos_x = threadIdx.x;"
            yield f"{u} tf_unit_pos_y = 0;"
            yield f"{u} tf_unit_pos_z = 0;"
            yield f"{u} tf_unit_pos = threadIdx.x;"
            yield f"{u} tf_absolute_pos = blockIdx.x * blockDim.x + threadIdx.x;"
            yield f"{u} tf_absolute_pos_x = tf_absolute_pos;"
            yield f"{u} tf_absolute_pos_y = 0;"
            yield f"{u} tf_absolute_pos_z = 0;"
            return
        yield f"{u} tf_cube_dim_x = blockDim.x;"
        yield f"{u} tf_cube_dim_y = blockDim.y;"
        yield f"{u} tf_cube_dim_z = blockDim.z;"
        yield f"{u} tf_cube_dim = blockDim.x * blockDim.y * blockDim.z;"
        yield f"{u} tf_unit_pos_x = threadIdx.x;"
        yield f"{u} tf_unit_pos_y = threadIdx.y;"
        yield f"{u} tf_unit_pos_z = threadIdx.z;"
        yield (
            f"{u} tf_unit_pos = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * "
            "threadIdx.z);"
        )
        yield f"{u} tf_absolute_pos = tf_cube * tf_cube_dim + tf_unit_pos;"
        yield f"{u} tf_absolute_pos_x = tf_cube_pos_x * blockDim.x + threadIdx.x;"
        yield f"{u} tf_absolute_pos_y = tf_cube_pos_y * blockDim.y + threadIdx.y;"
        yield f"{u} tf_absolute_pos_z = tf_cube_pos_z * blockDim.z + threadIdx.z;"

    def shared_declarations(self) -> Iterator[str]:
        """Static arrays as ``__shared__`` arrays; arrays sized at launch as pointers into the
        launch's dynamic shared memory, each at the offset :func:`ir.dynamic_shared_layout`
        gives (the JIT session passes the bytes it computes)."""
        align = ir.DYNAMIC_SHARED_ALIGN
        if self.kernel.dynamic_shared:
            yield f"extern __shared__ __align__({align}) unsigned char tf_dynamic_shared[];"
        at = "0ull"
        for a in self.kernel.shared:
            ctype = C_TYPE[a.dtype.name]
            if a.size_param is None:
                at_least = FRAGMENT_ALIGN if a.name in self.fragment_memory else align
                yield f"__shared__ __align__({at_least}) {ctype} {shared_name(a.name)}[{a.size}];"
                continue
            yield f"{ctype}* const {shared_name(a.name)} = ({ctype}*)(tf_dynamic_shared + {at});"
            n = f"(unsigned long long)(unsigned int){c_name(a.size_param, False)}"
            nbytes = f"{n} * {a.dtype.itemsize}ull"
            at = f"({at} + (({nbytes} + {align - 1}ull) & ~{align - 1}ull))"

    def emit(self) -> CudaKernelSource:
        abi = kernel_abi(self.spec)
        self.statements(self.kernel.body)
        # the declarations go before the body, which they do not depend on
        head = list(self.prologue())
        head += self.shared_declarations()
        head += subgroup_prologue(self.kernel)
        head += self.fragment_declarations()
        for r in self.kernel.registers:
            head.append(f"{C_TYPE[r.dtype.name]} r_{r.name}[{r.size}] = {{}};")
        for name, t in self.kernel.locals:
            if t is bool_:
                head.append(f"bool {c_name(name, True)} = false;")
            else:
                head.append(f"{C_TYPE[t.name]} {c_name(name, True)} = 0;")
        bounds = "" if self.spec.bounds is None else f"__launch_bounds__{self.spec.bounds} "
        symbol = kernel_symbol(self.spec)
        params = ",\n    ".join(p.c_decl for p in abi)
        header = (
            f"// tenferro-host DSL kernel {self.spec.kernel_name} "
            f"({self.kernel.filename}), target {self.spec.target}\n"
        )
        source = (
            header
            + (F16_HELPERS if float16 in self.kernel.value_types else "")
            + "".join(self.helpers[k] for k in sorted(self.helpers))
            + f'\nextern "C" __global__ void {bounds}{symbol}(\n    {params})\n{{\n'
            + "\n".join([self.INDENT * self.depth + text for text in head] + self.lines)
            + "\n}\n"
        )
        return CudaKernelSource(symbol, source, abi)

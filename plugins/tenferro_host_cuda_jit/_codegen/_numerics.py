"""CUDA C helpers that give the DSL's numeric rules: storage types, f16 conversions through
inline PTX (NVRTC wheels ship no ``cuda_fp16.h``), saturating casts, ``pow`` by squaring, float
``min``/``max`` with a fixed sign for two zeros, compare-and-swap atomics, exact literals and
wrapping integer arithmetic. The emitter (:mod:`._cuda_c`) includes only the helpers a kernel
uses."""

from __future__ import annotations

from tenferro_host import DType, bool_, float16, float32, float64, int64, uint32
from tenferro_host.kernel import ir

C_TYPE = {
    "float32": "float",
    "float64": "double",
    "float16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "bool": "unsigned char",
}
"""Storage / ABI types. Inside the kernel a bool value is a C ``bool``."""

UNSIGNED = {"int32": "unsigned int", "int64": "unsigned long long"}

F16_HELPERS = r"""
__device__ __forceinline__ float tf_h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short tf_f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ unsigned short tf_d2h(double d) {
    unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h;
}
"""

_SATURATING_CASTS = {
    # destination: (C type, its largest value, its smallest value); the bounds as doubles are
    # exact or round outward, so every double beyond them saturates
    "int32": ("int", "2147483647", "(-2147483647 - 1)"),
    "uint32": ("unsigned int", "4294967295u", "0u"),
    "int64": ("long long", "9223372036854775807LL", "(-9223372036854775807LL - 1)"),
}


def saturating_cast(dst: str) -> str:
    """``tf_sat_<dst>``: double -> ``dst`` truncating, saturating, NaN -> 0 (a C cast out of
    range is undefined)."""
    ctype, hi, lo = _SATURATING_CASTS[dst]
    return (
        f"__device__ __forceinline__ {ctype} tf_sat_{dst}(double x) {{\n"
        f"    return x != x ? ({ctype})0 : x >= (double){hi} ? {hi} : x <= (double){lo} ? {lo}"
        f" : ({ctype})x;\n"
        "}\n"
    )


def pow_helper(ctype: str) -> str:
    """``tf_pow``/``tf_powf``: ``x ** y`` by the DSL's rule (:data:`ir.POW_SQUARING_MAX`),
    unrolled squaring with rounded (never contracted) multiplies, C ``pow`` otherwise."""
    f = "f" if ctype == "float" else ""
    mul, one = ("__fmul_rn", "1.0f") if f else ("__dmul_rn", "1.0")
    div = "__fdiv_rn" if f else "__ddiv_rn"
    steps = []
    for bit in range(ir.POW_SQUARING_BITS):
        steps.append(f"        if (n & {1 << bit}u) p = {mul}(p, b);\n")
        if bit + 1 < ir.POW_SQUARING_BITS:
            steps.append(f"        b = {mul}(b, b);\n")
    return (
        f"__device__ __forceinline__ {ctype} tf_pow{f}({ctype} x, {ctype} y) {{\n"
        f"    {ctype} ay = fabs{f}(y);\n"
        f"    if (isfinite(x) && x != 0 && ay >= 1 && ay <= {ir.POW_SQUARING_MAX} "
        f"&& trunc{f}(y) == y) {{\n"
        "        unsigned int n = (unsigned int)ay;\n"
        f"        {ctype} b = x, p = {one};\n"
        + "".join(steps)
        + f"        return y < 0 ? {div}({one}, p) : p;\n"
        "    }\n"
        f"    return pow{f}(x, y);\n"
        "}\n"
    )


SIGNED_ZERO_MIN_MAX = r"""
__device__ __forceinline__ float tf_fminf(float a, float b) {
    return (a == 0.0f && b == 0.0f) ? __int_as_float(__float_as_int(a) | __float_as_int(b))
                                    : fminf(a, b);
}
__device__ __forceinline__ float tf_fmaxf(float a, float b) {
    return (a == 0.0f && b == 0.0f) ? __int_as_float(__float_as_int(a) & __float_as_int(b))
                                    : fmaxf(a, b);
}
__device__ __forceinline__ double tf_fmin(double a, double b) {
    return (a == 0.0 && b == 0.0)
        ? __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b)) : fmin(a, b);
}
__device__ __forceinline__ double tf_fmax(double a, double b) {
    return (a == 0.0 && b == 0.0)
        ? __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b)) : fmax(a, b);
}
"""
"""Float ``K.min``/``K.max``: C ``fmin``/``fmax``, and of two zeros min is -0 if either is, max
+0 if either is (C leaves that choice open; every target makes this one)."""

ROUNDED_OP = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}

_BITS = {
    "float32": ("unsigned int", "__float_as_uint", "__uint_as_float", "float"),
    "float64": (
        "unsigned long long",
        "(unsigned long long)__double_as_longlong",
        "__longlong_as_double",
        "double",
    ),
}
"""A float type's same-size unsigned integer and the bit casts both ways."""

NATIVE_ATOMIC = {
    "add": "atomicAdd",
    "min": "atomicMin",
    "max": "atomicMax",
    "exchange": "atomicExch",
    "compare_exchange": "atomicCAS",
}


def cas_loop(op: str, dtype: DType) -> str:
    """A float atomic through atomicCAS on the bit pattern (``tf_atomic_<op>_<type>``)."""
    bits, to_bits, from_bits, ctype = _BITS[dtype.name]
    suffix = "f" if dtype is float32 else ""
    if op == "compare_exchange":
        return (
            f"__device__ __forceinline__ {ctype} tf_atomic_{op}_{dtype.name}({ctype}* p, "
            f"{ctype} cmp, {ctype} v) {{\n"
            f"    return {from_bits}(atomicCAS(({bits}*)p, {to_bits}(cmp), {to_bits}(v)));\n}}\n"
        )
    update = {"min": f"tf_fmin{suffix}(x, v)", "max": f"tf_fmax{suffix}(x, v)", "exchange": "v"}[
        op
    ]  # K.min/K.max semantics (SIGNED_ZERO_MIN_MAX)
    return (
        f"__device__ __forceinline__ {ctype} tf_atomic_{op}_{dtype.name}({ctype}* p, {ctype} v) "
        "{\n"
        f"    {bits}* q = ({bits}*)p;\n"
        f"    {bits} old = *q, seen;\n"
        "    do {\n"
        f"        seen = old;\n        const {ctype} x = {from_bits}(seen);\n"
        f"        old = atomicCAS(q, seen, {to_bits}({update}));\n"
        "    } while (old != seen);\n"
        f"    return {from_bits}(old);\n}}\n"
    )


def _float_literal(value: float, dtype: DType) -> str:
    if value != value:
        return (
            "__longlong_as_double(0x7ff8000000000000LL)"
            if dtype is float64
            else "__int_as_float(0x7fc00000)"
        )
    if value in (float("inf"), float("-inf")):
        sign = value < 0
        if dtype is float64:
            return f"__longlong_as_double({'0xfff' if sign else '0x7ff'}0000000000000LL)"
        return f"__int_as_float({'0xff800000' if sign else '0x7f800000'})"
    text = repr(float(value))  # exact: the value is already representable in ``dtype``
    return f"({text})" if dtype is float64 else f"({text}f)"


def c_literal(c: ir.Const) -> str:
    """A constant as a C literal of its IR type (suffix and cast, ``true``/``false``)."""
    t = c.type
    if t is bool_:
        return "true" if c.value else "false"
    if t.is_float:
        lit = _float_literal(float(c.value), float32 if t is float16 else t)
        return f"tf_f2h({lit})" if t is float16 else lit
    v = int(c.value)
    if t is uint32:
        return f"{v}u"
    suffix = "LL" if t is int64 else ""
    lo = -(2 ** (8 * t.itemsize - 1))
    if v == lo:
        return f"({lo + 1}{suffix} - 1)"
    return f"({v}{suffix})" if v < 0 else f"{v}{suffix}"


def wrapping(op: str, a: str, b: str, t: DType) -> str:
    """Integer ``a op b`` that wraps around: signed types compute in their unsigned twin."""
    unsigned = UNSIGNED.get(t.name)
    if unsigned is None:
        return f"({a} {op} {b})"
    return f"(({C_TYPE[t.name]})(({unsigned})({a}) {op} ({unsigned})({b})))"

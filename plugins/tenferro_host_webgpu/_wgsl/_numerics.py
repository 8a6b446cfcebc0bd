"""WGSL helper functions that give the DSL's numeric rules where WGSL builtins do not.

Drivers compile WGSL with fast-math assumptions (Mesa's llvmpipe evaluates ``x != x`` as false
for a NaN ``x``), WGSL ``pow`` is undefined for a negative base, WGSL float ``%`` is
``x - y * trunc(x / y)`` (wrong for large quotients) and float -> int conversions clamp to the
nearest *float* below the integer limit. Each helper here states the rule it implements; all of
them test NaN on the bit pattern, which no floating-point optimisation can fold away. f16 values
go through the f32 helpers (every f16 is an f32, and each result rounds back once).

:func:`helper` returns a helper's source by name together with the helpers it calls, so the
emitter includes only what a kernel uses.
"""

from __future__ import annotations

from tenferro_host.kernel.ir import POW_SQUARING_BITS, POW_SQUARING_MAX

_NAN = "bitcast<f32>(0x7fc00000u)"
_INF = "bitcast<f32>(0x7f800000u)"

_COMPARE_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=="}


def _squaring() -> str:
    """The body of ``tf_pow_f32`` for an integer ``1 <= |y| <= POW_SQUARING_MAX``: ``|x|``
    raised by repeated squaring, unrolled (no loop counts against a software adapter's trip
    cap), and its reciprocal for a negative ``y``; the caller applies the sign of ``x``. A
    zero ``p`` (underflow) gives the infinity C ``pow`` gives, without dividing by zero."""
    lines = ["        let n = u32(ay);\n", "        var b = ax;\n", "        var p = 1.0f;\n"]
    for bit in range(POW_SQUARING_BITS):
        lines.append(f"        if ((n & {1 << bit}u) != 0u) {{ p = p * b; }}\n")
        if bit + 1 < POW_SQUARING_BITS:
            lines.append("        b = b * b;\n")
    lines.append(f"        r = select(p, select(1.0f / p, {_INF}, p == 0.0f), y < 0.0f);\n")
    return "".join(lines)


_SOURCES: dict[str, tuple[tuple[str, ...], str]] = {
    "tf_isnan_f32": (
        (),
        (
            "fn tf_isnan_f32(x: f32) -> bool {\n"
            "    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;\n"
            "}\n"
        ),
    ),
    "tf_pow_f32": (
        ("tf_isnan_f32",),
        (
            "fn tf_pow_f32(x: f32, y: f32) -> f32 {\n"
            "    // C pow: pow(x, 0) = 1 and pow(1, y) = 1 even for NaN; a negative base takes an\n"
            "    // integer exponent (the sign follows its parity), otherwise NaN; small integer\n"
            "    // exponents by repeated squaring (exact when the result is representable)\n"
            "    let nx = tf_isnan_f32(x);\n"
            "    let ny = tf_isnan_f32(y);\n"
            "    if (!ny && y == 0.0f) { return 1.0f; }\n"
            "    if (!nx && x == 1.0f) { return 1.0f; }\n"
            f"    if (nx || ny) {{ return {_NAN}; }}\n"
            "    let ax = abs(x);\n"
            "    let ay = abs(y);\n"
            "    let negative = (bitcast<u32>(x) & 0x80000000u) != 0u;\n"
            f"    if (ay == {_INF}) {{\n"
            "        if (ax == 1.0f) { return 1.0f; }\n"
            f"        return select(0.0f, {_INF}, (ax > 1.0f) == (y > 0.0f));\n"
            "    }\n"
            "    let integer = floor(ay) == ay;\n"
            "    let odd = integer && ay < 16777216.0f && (u32(ay) & 1u) == 1u;\n"
            "    var r: f32;\n"
            "    if (ax == 0.0f) {\n"
            f"        r = select(0.0f, {_INF}, y < 0.0f);\n"
            f"    }} else if (ax == {_INF}) {{\n"
            f"        r = select(0.0f, {_INF}, y > 0.0f);\n"
            f"    }} else if (integer && ay <= {float(POW_SQUARING_MAX)}f) {{\n"
            f"{_squaring()}"
            "    } else {\n"
            f"        if (negative && !integer) {{ return {_NAN}; }}\n"
            "        r = pow(ax, y);\n"
            "    }\n"
            "    return select(r, -r, negative && odd);\n"
            "}\n"
        ),
    ),
    "tf_fmod_f32": (
        (),
        (
            "fn tf_fmod_f32(x: f32, y: f32) -> f32 {\n"
            "    // C fmod, exact: significand remainders, scaled 8 bits a step\n"
            "    let ux = bitcast<u32>(x);\n"
            "    let sign = ux & 0x80000000u;\n"
            "    let ax = ux & 0x7fffffffu;\n"
            "    let ay = bitcast<u32>(y) & 0x7fffffffu;\n"
            f"    if (ax >= 0x7f800000u || ay > 0x7f800000u || ay == 0u) {{ return {_NAN}; }}\n"
            "    if (ax < ay) { return x; }\n"
            "    if (ax == ay) { return bitcast<f32>(sign); }\n"
            "    let ex = i32(ax >> 23u);\n"
            "    let ey = i32(ay >> 23u);\n"
            "    let mx = select((ax & 0x7fffffu) | 0x800000u, ax, ex == 0);\n"
            "    let my = select((ay & 0x7fffffu) | 0x800000u, ay, ey == 0);\n"
            "    var r = mx % my;\n"
            "    var d = max(ex, 1) - max(ey, 1);\n"
            "    loop {\n"
            "        if (d <= 0 || r == 0u) { break; }\n"
            "        let s = min(d, 8);\n"
            "        r = (r << u32(s)) % my;\n"
            "        d = d - s;\n"
            "    }\n"
            "    if (r == 0u) { return bitcast<f32>(sign); }\n"
            "    // r * 2^(max(ey, 1) - 150) as a normal or subnormal float\n"
            "    let k = 23 - i32(firstLeadingBit(r));\n"
            "    let e = max(ey, 1) - k;\n"
            "    if (e >= 1) {\n"
            "        return bitcast<f32>(sign | (u32(e) << 23u) | ((r << u32(k)) & 0x7fffffu));\n"
            "    }\n"
            "    return bitcast<f32>(sign | (r << u32(max(ey, 1) - 1)));\n"
            "}\n"
        ),
    ),
    "tf_i32_of_f32": (
        ("tf_isnan_f32",),
        (
            "fn tf_i32_of_f32(x: f32) -> i32 {\n"
            "    // truncate, saturate, NaN -> 0\n"
            "    if (tf_isnan_f32(x)) { return 0i; }\n"
            "    if (x >= 2147483648.0f) { return 2147483647i; }\n"
            "    if (x <= -2147483648.0f) { return -2147483647i - 1i; }\n"
            "    return i32(x);\n"
            "}\n"
        ),
    ),
    "tf_u32_of_f32": (
        ("tf_isnan_f32",),
        (
            "fn tf_u32_of_f32(x: f32) -> u32 {\n"
            "    // truncate, saturate, NaN -> 0\n"
            "    if (tf_isnan_f32(x) || x <= 0.0f) { return 0u; }\n"
            "    if (x >= 4294967296.0f) { return 4294967295u; }\n"
            "    return u32(x);\n"
            "}\n"
        ),
    ),
}

for _op, _sym in _COMPARE_OPS.items():
    _SOURCES[f"tf_{_op}_f32"] = (
        ("tf_isnan_f32",),
        (
            f"fn tf_{_op}_f32(a: f32, b: f32) -> bool {{\n"
            f"    return !(tf_isnan_f32(a) || tf_isnan_f32(b)) && a {_sym} b;\n"
            "}\n"
        ),
    )
_SOURCES["tf_ne_f32"] = (
    ("tf_isnan_f32",),
    (
        "fn tf_ne_f32(a: f32, b: f32) -> bool {\n"
        "    return tf_isnan_f32(a) || tf_isnan_f32(b) || a != b;\n"
        "}\n"
    ),
)
for _func, _join in (("min", "|"), ("max", "&")):
    _SOURCES[f"tf_f{_func}_f32"] = (
        ("tf_isnan_f32",),
        (
            f"fn tf_f{_func}_f32(a: f32, b: f32) -> f32 {{\n"
            "    // C fmin/fmax: a NaN operand yields the other operand; of two zeros, min is -0\n"
            "    // if either is and max +0 if either is (WGSL leaves that choice open)\n"
            "    if (tf_isnan_f32(a)) { return b; }\n"
            "    if (tf_isnan_f32(b)) { return a; }\n"
            "    if (a == 0.0f && b == 0.0f) {\n"
            f"        return bitcast<f32>(bitcast<u32>(a) {_join} bitcast<u32>(b));\n"
            "    }\n"
            f"    return {_func}(a, b);\n"
            "}\n"
        ),
    )


def helper(name: str) -> list[tuple[str, str]]:
    """``(name, source)`` of helper ``name`` and of every helper it calls, callees first."""
    out: list[tuple[str, str]] = []
    deps, source = _SOURCES[name]
    for dep in deps:
        out += helper(dep)
    out.append((name, source))
    return out


COMPARE_HELPERS = ("lt", "le", "gt", "ge", "eq", "ne")
"""Comparison ops with a NaN-exact helper ``tf_<op>_f32``."""

__all__ = ["COMPARE_HELPERS", "helper"]


def atomic_helper(name: str, op: str, memory: str, t: str) -> str:
    """A compare-exchange loop on ``memory`` (f32 stored as u32 bits; ints as themselves)."""
    ref = f"&{memory}[i]"
    if op == "compare_exchange":
        bits = "u32" if t == "f32" else t
        to_bits = (lambda v: f"bitcast<u32>({v})") if t == "f32" else (lambda v: v)
        back = "bitcast<f32>(r.old_value)" if t == "f32" else "r.old_value"
        return (
            f"fn {name}(i: u32, cmp: {t}, v: {t}) -> {t} {{\n"
            f"    let want: {bits} = {to_bits('cmp')};\n"
            "    loop {\n"
            f"        let r = atomicCompareExchangeWeak({ref}, want, {to_bits('v')});\n"
            f"        if (r.exchanged || r.old_value != want) {{ return {back}; }}\n"
            "    }\n"
            "    return cmp;  // not reached: naga wants a return after the loop\n"
            "}\n"
        )
    update = {"add": "x + v", "min": "tf_fmin_f32(x, v)", "max": "tf_fmax_f32(x, v)"}[op]
    return (
        f"fn {name}(i: u32, v: f32) -> f32 {{\n"
        f"    var old = atomicLoad({ref});\n"
        "    loop {\n"
        "        let x = bitcast<f32>(old);\n"
        f"        let r = atomicCompareExchangeWeak({ref}, old, bitcast<u32>({update}));\n"
        "        if (r.exchanged) { return x; }\n"
        "        old = r.old_value;\n"
        "    }\n"
        "    return bitcast<f32>(old);  // not reached: naga wants a return after the loop\n"
        "}\n"
    )

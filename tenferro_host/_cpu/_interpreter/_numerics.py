"""The interpreter's numeric rules on numpy lanes: pow, casts, math functions and atomics, as
every target computes them (see ``docs/dsl-ir.md``, "Numeric rules")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import DType, bool_, dtype, float64
from ...kernel import ir


def power(a: Any, b: Any) -> Any:
    """``a ** b`` by :data:`~.ir.POW_SQUARING_MAX`: small integer exponents by repeated
    squaring (as WebGPU and CUDA compute them), all others numpy's C ``pow``."""
    dt = np.result_type(a, b)
    work = np.float32 if dt == np.float16 else dt
    x, y = np.asarray(a, work), np.asarray(b, work)
    out = np.power(x, y)
    n = np.abs(y)
    squaring = (
        np.isfinite(x) & (x != 0) & (y == np.trunc(y)) & (n >= 1) & (n <= ir.POW_SQUARING_MAX)
    )
    if squaring.any():
        k = np.where(squaring, n, 0).astype(np.int64)
        r, base = np.ones_like(x), x
        for bit in range(ir.POW_SQUARING_BITS):
            r = np.where((k >> bit) & 1 == 1, r * base, r)
            base = base * base
        out = np.where(squaring, np.where(y < 0, 1 / r, r), out)
    return out.astype(dt) if out.ndim else dt.type(out)


COMPARE: dict[str, Callable[..., Any]] = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}
INT_OPS: dict[str, Callable[..., Any]] = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
FLOAT_OPS: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "floordiv": lambda a, b: np.trunc(np.divide(a, b)),
    "mod": np.fmod,
    "pow": power,
}


def read_modify_write(
    memory: np.ndarray[Any, Any],
    pos: np.ndarray[Any, Any],
    op: str,
    value: np.ndarray[Any, Any],
    compare: np.ndarray[Any, Any] | None,
) -> Any:
    """Atomics of one statement, applied to ``memory[pos]`` in lane order; the old values."""
    old = np.empty(len(pos), memory.dtype)
    if len(pos) == 0:
        return old
    order = np.argsort(pos, kind="stable")
    sorted_pos = pos[order]
    first = np.r_[True, sorted_pos[1:] != sorted_pos[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(pos)), 0))
    if op == "add" and memory.dtype.kind in "iu":
        # integers wrap: a running sum per element in int64 (modular), cast back
        vals = value[order].astype(np.int64)
        total = np.cumsum(vals)
        before = total - vals - (total - vals)[start]
        base = memory[sorted_pos].astype(np.int64)
        old[order] = (base + before).astype(memory.dtype)
        last = np.r_[first[1:], True]
        memory[sorted_pos[last]] = (base + before + vals)[last].astype(memory.dtype)
        return old
    rank = np.arange(len(pos)) - start
    for r in range(int(rank.max()) + 1):
        lanes = order[rank == r]  # distinct positions
        at = pos[lanes]
        current = memory[at].copy()
        old[lanes] = current
        memory[at] = _atomic_result(
            op, current, value[lanes], None if compare is None else compare[lanes]
        )
    return old


def _atomic_result(op: str, current: Any, value: Any, compare: Any) -> Any:
    if op == "add":
        return current + value
    if op in ("min", "max"):  # as K.min/K.max
        return math_func(op, [current, value], dtype(current.dtype))
    if op == "exchange":
        return value
    bits = f"u{current.dtype.itemsize}"
    return np.where(current.view(bits) == compare.view(bits), value, current)


def cast(value: Any, source: DType, target: DType) -> Any:
    """To bool is ``!= 0``; float -> int truncates and saturates (NaN -> 0), as every target
    does; int -> int wraps; int -> float rounds to nearest."""
    if target is bool_:
        return np.not_equal(value, 0)
    if source.is_float and target.is_integer:
        return saturate(value, target)
    return np.asarray(value).astype(target.numpy)


def saturate(value: Any, target: DType) -> Any:
    """Float -> int: truncate toward zero, clamp to ``target``'s range, NaN -> 0 (WGSL's and
    PTX ``cvt.rzi``'s rule; numpy's own conversion gives x86 garbage out of range)."""
    info = np.iinfo(target.numpy)
    x = np.trunc(np.asarray(value, np.float64))
    lo, hi = float(info.min), float(info.max)  # hi rounds up to 2^63 for i64: compare >=
    inside = np.where(np.isnan(x) | (x < lo) | (x >= hi), 0.0, x)
    out = inside.astype(target.numpy)
    out = np.where(x >= hi, target.numpy.type(info.max), out)
    return np.where(x < lo, target.numpy.type(info.min), out).astype(target.numpy, copy=False)


def math_func(func: str, args: list[Any], t: DType) -> Any:
    """One math intrinsic on arguments of type ``t``; the result has type ``t``."""
    if func == "fma":
        if t is float64:
            result = args[0] * args[1] + args[2]
        else:  # exact product and sum in f64, one rounding: what a fused multiply-add gives
            a, b, c = (np.asarray(x, np.float64) for x in args)
            result = a * b + c
    elif func in ("min", "max"):
        if t.is_float:  # C fmin/fmax, and of two zeros: min -0 if either is, max +0 if either is
            a, b = (np.asarray(x) for x in args)
            result = (np.fmin if func == "min" else np.fmax)(a, b)
            sign = (np.logical_or if func == "min" else np.logical_and)(
                np.signbit(a), np.signbit(b)
            )
            zeros = (a == 0) & (b == 0)
            result = np.where(zeros, np.where(sign, -0.0, 0.0).astype(result.dtype), result)
        else:
            result = (np.minimum if func == "min" else np.maximum)(*args)
    else:
        result = _UNARY_MATH[func](args[0])
    return np.asarray(result).astype(t.numpy, copy=False)


_UNARY_MATH: dict[str, Callable[..., Any]] = {
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
}

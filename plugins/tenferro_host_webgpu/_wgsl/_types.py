"""WGSL types of the DSL's values: scalars, storage elements, atomic memory and literals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tenferro_host import DType, UnsupportedError
from tenferro_host.kernel import ir

_SCALAR = {"float32": "f32", "float16": "f16", "int32": "i32", "uint32": "u32", "bool": "bool"}
_NEVER = {"float64": "shader-f64", "int64": "shader-int64"}


def value_types(kernel: ir.KernelIR) -> Mapping[DType, str]:
    """Every type a value of ``kernel`` has (parameters, locals, every expression), with where
    it first appears; what the portability rule and ``enable f16`` are decided on. Walked once
    per kernel IR (:attr:`ir.KernelIR.value_types`)."""
    return kernel.value_types


def wgsl_type(dt: DType, what: str = "") -> str:
    """The WGSL scalar type of ``dt``; f64/i64 are never requested (portability rule)."""
    found = _SCALAR.get(dt.name)
    if found is None:
        feature = _NEVER.get(dt.name, dt.name)
        raise UnsupportedError(
            f"{what or dt.name} is {dt.name}, which WebGPU kernels do not support: the "
            f"portability rule never requests {feature!r}; use a 32-bit type or run on cuda/cpu",
            backend="webgpu",
            feature=feature,
        )
    return found


def check_portable(kernel: ir.KernelIR, shader_f16: bool, backend: str) -> None:
    """The portability rule for ``kernel``'s values: no f64/i64 ever, f16 only on a device with
    the ``shader-f16`` feature; typed errors naming the value and the way out."""
    for dt, where in value_types(kernel).items():
        wgsl_type(dt, f"{where} of kernel {kernel.name!r}")
        if dt.name == "float16" and not shader_f16:
            raise UnsupportedError(
                f"kernel {kernel.name!r} uses f16 ({where}), but the adapter does not "
                "offer the 'shader-f16' feature; use f32 or another adapter",
                backend=backend,
                feature="shader-f16",
            )


def storage_type(dt: DType) -> str:
    """The element type of a storage buffer holding ``dt`` (bool -> u32)."""
    return "u32" if dt.name == "bool" else wgsl_type(dt)


def literal(value: Any, dt: DType) -> str:
    """A WGSL literal of type ``dt``."""
    t = wgsl_type(dt)
    if t == "bool":
        return "true" if value else "false"
    if t == "u32":
        return f"{int(value) % (1 << 32)}u"
    if t == "i32":
        v = int(value)
        return f"({v + 1}i - 1i)" if v == -(1 << 31) else (f"({v}i)" if v < 0 else f"{v}i")
    f = float(value)
    suffix = "h" if t == "f16" else "f"
    if f != f or f in (float("inf"), float("-inf")):
        bits = {"nan": 0x7FC00000, "inf": 0x7F800000, "-inf": 0xFF800000}[repr(f)]
        as_f32 = f"bitcast<f32>({bits}u)"
        return f"{t}({as_f32})" if t == "f16" else as_f32
    text = repr(f)
    return f"({text}{suffix})" if f < 0 else f"{text}{suffix}"


def atomic_type(dt: DType) -> str:
    """The WGSL type of memory that atomics use: f32 travels as its u32 bits."""
    return "atomic<u32>" if dt.name == "float32" else f"atomic<{wgsl_type(dt)}>"


def workgroup_bytes(kernel: ir.KernelIR, sizes: Sequence[int] = ()) -> int:
    """Bytes of workgroup memory the kernel's shared arrays take (elements of at least 4
    bytes: atomics and bools are 32-bit, and f16 arrays may be padded); ``sizes``: those of the
    arrays sized at launch (they count zero without)."""
    dynamic = dict(zip(kernel.dynamic_shared, sizes, strict=False))
    return sum(dynamic.get(a, a.size) * max(4, a.dtype.itemsize) for a in kernel.shared)

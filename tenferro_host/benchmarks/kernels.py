# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""The kernels every benchmark row launches: one f32 add, in CUDA C, the DSL and WGSL; and the
DSL fill that the soak's sessions and the launch fuzzer's sanity checks launch.

The same add everywhere (``out[i] = lhs[i] + rhs[i]`` for ``i < n``), so each row's figure
differs from its baseline's only by the path that launches it. ``DSL_OP`` is an op whose only
variant is ``dsl``: ``host.run`` of it on CUDA takes the DSL path (the native ``cuda-raw``
variant of ``ext_add_kernel.add`` would otherwise win).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import kernel as K
from ..ops import OpSpec, Signature

CUDA_ADD = r"""
extern "C" __global__ void add_kernel(float* out, const float* lhs, const float* rhs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lhs[i] + rhs[i];
}
"""

WGSL_ADD = """
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> lhs: array<f32>;
@group(0) @binding(2) var<storage, read> rhs: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < arrayLength(&out)) {
        out[i] = lhs[i] + rhs[i];
    }
}
"""


@K.kernel
def dsl_add(out: K.Array[K.F], lhs: K.Array[K.F], rhs: K.Array[K.F]):
    """``out = lhs + rhs``, one unit per element."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = lhs[i] + rhs[i]


@K.kernel
def saxpy(out: K.Array[K.F], x: K.Array[K.F], y: K.Array[K.F], a: K.F):
    """out = a * x + y, one unit per element (docs/contract.md's saxpy)."""  # noqa: D403
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = a * x[i] + y[i]


@K.kernel
def fill(out: K.Array[K.F], v: K.F):
    """``out[:] = v``, one unit per element."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = v


DSL_OP = "tenferro_bench.dsl_add"
#: ``a * x + y`` with its float attribute ``a``, dsl-only.
AXPY_OP = "tenferro_bench.dsl_axpy"


def _dsl_variant(ex: Any, lhs: Any, rhs: Any) -> Any:
    with ex.jit(DSL_OP) as js:
        out = js.alloc_output(lhs.dtype, lhs.shape)
        js.launch(dsl_add, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, lhs, rhs)
    return out


def _axpy_variant(ex: Any, x: Any, y: Any, a: float = 1.0) -> Any:
    with ex.jit(AXPY_OP) as js:
        out = js.alloc_output(x.dtype, x.shape)
        js.launch(saxpy, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x, y, a)
    return out


def register_dsl_op(host: Any) -> None:
    """Register ``DSL_OP`` (a dsl-only add) and ``AXPY_OP`` with ``host``, once."""
    if DSL_OP in host.registry.ops:
        return
    view = host.registry.staging("tenferro-host-bench")
    view.add_op(
        OpSpec(
            name=DSL_OP,
            signature=Signature(inputs=("lhs", "rhs")),
            reference=np.add,
            variants={"dsl": _dsl_variant},
        )
    )
    view.add_op(
        OpSpec(
            name=AXPY_OP,
            signature=Signature(inputs=("x", "y"), attributes={"a": float}),
            reference=lambda x, y, a=1.0: a * x + y,
            variants={"dsl": _axpy_variant},
        )
    )
    view.commit()


__all__ = [
    "AXPY_OP",
    "CUDA_ADD",
    "DSL_OP",
    "WGSL_ADD",
    "dsl_add",
    "fill",
    "register_dsl_op",
    "saxpy",
]

"""The ``cuda-raw`` variants: cuBLAS and cuSOLVER through CuPy, on the raw session's stream.

GEMMs call ``cublasGemmEx``/``cublasGemmStridedBatchedEx`` directly on the borrowed refs'
device pointers: tensors are column-major, which is cuBLAS's own layout, so no operand is
transposed or copied (a non-compact input is made compact on the device first). The
parameters match ``cupy.matmul``'s: f16 in and out with float32 accumulation and tensor-op
algorithms, f32 with ``CUBLAS_COMPUTE_32F`` (no TF32), f64 and complex in their own
precision. ``sum``, ``norm``, ``qr`` and ``svd`` run CuPy's routines on CuPy views of the
refs and write into the op's outputs. None of them synchronizes the host. The vendor
libraries may: CuPy reads cuSOLVER's ``devInfo`` (a wait) only under
``cupyx.errstate(linalg="raise")``, and a cuSOLVER routine may block inside the library — the
docs say so and ``bench/linalg_bench.py`` counts, per op, the calls that blocked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from tenferro_host import Tensor, UnsupportedError

from . import reference
from .checks import (
    GEMM_DTYPES,
    SOLVER_DTYPES,
    accepted,
    gemm_dims,
    normalize_axes,
    real_dtype,
    require_matrix,
)
from .cupy_bridge import as_cupy, on_session_stream
from .views import compact

_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class GemmType:
    """cuBLAS data type, compute type and host scalars (alpha = 1, beta = 0) of one dtype."""

    data: int
    compute: int
    one: np.ndarray
    zero: np.ndarray


@cache
def gemm_type(cupy: Any, name: str) -> GemmType:
    """The cuBLAS types and host scalars of the dtype ``name`` (cached)."""
    runtime, cublas = cupy.cuda.runtime, cupy.cuda.cublas
    data = {
        "float16": runtime.CUDA_R_16F,
        "float32": runtime.CUDA_R_32F,
        "float64": runtime.CUDA_R_64F,
        "complex64": runtime.CUDA_C_32F,
        "complex128": runtime.CUDA_C_64F,
    }[name]
    wide = name in ("float64", "complex128")
    compute = cublas.CUBLAS_COMPUTE_64F if wide else cublas.CUBLAS_COMPUTE_32F
    scalar = np.dtype(np.float32 if name == "float16" else name)
    return GemmType(data, compute, np.ones((), scalar), np.zeros((), scalar))


def _gemm(ex: Any, op: str, a: Tensor, b: Tensor, batched: bool) -> Tensor:
    """``a (m, k, *batch) @ b (k, n, *batch)`` as one cuBLAS (strided batched) GEMM."""
    m, k, n, batch = gemm_dims(op, a, b, batched)
    count = math.prod(batch)
    shape = (m, n, *batch)
    if max(m, n, k, count) > _INT_MAX:
        raise UnsupportedError(
            f"{op}: cuBLAS takes 32-bit sizes; {a.shape} @ {b.shape} exceeds {_INT_MAX}",
            backend=ex.runtime.name,
            feature="gemm size",
            op=op,
        )
    runtime = ex.runtime
    if k == 0 or m * n * count == 0:
        return runtime.zeros(a.dtype, shape)
    a, b = compact(runtime, a), compact(runtime, b)
    with ex.raw(op) as rs:
        out = rs.alloc_output(a.dtype, shape)
        refs = rs.tensor(a), rs.tensor(b), rs.tensor_mut(out)
        pa, pb, pc = (ref.data_ptr_unsafe() for ref in refs)
        major, _ = ex.device_info.compute_capability
        with on_session_stream(rs) as cupy:
            cublas = cupy.cuda.cublas
            t = gemm_type(cupy, a.dtype.name)
            algo = (
                cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP
                if major >= 8 or (major >= 7 and a.dtype.name == "float16")
                else cublas.CUBLAS_GEMM_DEFAULT
            )
            handle = cupy.cuda.device.get_cublas_handle()
            no = cublas.CUBLAS_OP_N
            # (op a, op b, m, n, k, alpha, then each matrix: pointer, type, leading dimension)
            dims = (no, no, m, n, k, t.one.ctypes.data)
            mat_a, mat_b, mat_c = (pa, t.data, m), (pb, t.data, k), (pc, t.data, m)
            beta = t.zero.ctypes.data
            if count == 1:
                cublas.gemmEx(handle, *dims, *mat_a, *mat_b, beta, *mat_c, t.compute, algo)
            else:  # each matrix's batch stride after its leading dimension
                cublas.gemmStridedBatchedEx(
                    handle, *dims, *mat_a, m * k, *mat_b, k * n, beta, *mat_c, m * n, count,
                    t.compute, algo,
                )  # fmt: skip
        return out


def matmul(ex: Any, a: Tensor, b: Tensor) -> Tensor:
    """``linalg.matmul`` as one cuBLAS GEMM."""
    return _gemm(ex, "linalg.matmul", a, b, batched=False)


def batched_matmul(ex: Any, a: Tensor, b: Tensor) -> Tensor:
    """``linalg.batched_matmul`` as one strided batched cuBLAS GEMM."""
    return _gemm(ex, "linalg.batched_matmul", a, b, batched=True)


def sum(ex: Any, x: Tensor, axis: Any = None) -> Tensor:  # noqa: A001 - the op's name
    """CuPy's sum (f16 accumulates in float32) straight into the output tensor."""
    op = "linalg.sum"
    accepted(op, x, GEMM_DTYPES, "x")
    axes = normalize_axes(op, axis, x.ndim)
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if x.numel == 0:
        return ex.runtime.zeros(x.dtype, shape)
    with ex.raw(op) as rs:
        out = rs.alloc_output(x.dtype, shape)
        with on_session_stream(rs) as cupy:
            src = as_cupy(cupy, rs.tensor_strided(x))
            cupy.sum(src, axis=axes, out=as_cupy(cupy, rs.tensor_mut(out)))
        return out


def norm(ex: Any, x: Tensor) -> Tensor:
    """The 2-norm of all elements (real output for complex input)."""
    op = "linalg.norm"
    accepted(op, x, SOLVER_DTYPES, "x")
    real = real_dtype(x.dtype)
    if x.numel == 0:
        return ex.runtime.zeros(real, ())
    with ex.raw(op) as rs:
        out = rs.alloc_output(real, ())
        with on_session_stream(rs) as cupy:
            value = cupy.linalg.norm(as_cupy(cupy, rs.tensor_strided(x)))
            cupy.copyto(as_cupy(cupy, rs.tensor_mut(out)), value)
        return out


def _matrix(op: str, a: Tensor) -> tuple[int, int]:
    accepted(op, a, SOLVER_DTYPES, "a")
    return require_matrix(op, a)


def _factor(
    ex: Any, op: str, a: Tensor, shapes: list[tuple[Any, tuple[int, ...]]], factorize: Any
) -> tuple[Tensor, ...]:
    """Run ``factorize(cupy, a_view)`` and copy its results into fresh output tensors."""
    if a.numel == 0:
        return tuple(ex.runtime.zeros(dt, shape) for dt, shape in shapes)
    with ex.raw(op) as rs:
        outs = [rs.alloc_output(dt, shape) for dt, shape in shapes]
        with on_session_stream(rs) as cupy:
            results = factorize(cupy, as_cupy(cupy, rs.tensor_strided(a)))
            for out, value in zip(outs, results, strict=True):
                cupy.copyto(as_cupy(cupy, rs.tensor_mut(out)), value)
        return tuple(outs)


def qr(ex: Any, a: Tensor) -> tuple[Tensor, ...]:
    """Reduced QR (cuSOLVER geqrf/orgqr through ``cupy.linalg.qr``), R's diagonal >= 0."""
    m, n = _matrix("linalg.qr", a)
    k = min(m, n)

    def factorize(cupy: Any, x: Any) -> tuple[Any, Any]:
        return reference.canonical_qr(cupy, *cupy.linalg.qr(x, mode="reduced"))

    return _factor(ex, "linalg.qr", a, [(a.dtype, (m, k)), (a.dtype, (k, n))], factorize)


def svd(ex: Any, a: Tensor) -> tuple[Tensor, ...]:
    """Thin SVD (cuSOLVER through ``cupy.linalg.svd``) in the canonical phase convention."""
    m, n = _matrix("linalg.svd", a)
    k = min(m, n)
    real = real_dtype(a.dtype)

    def factorize(cupy: Any, x: Any) -> tuple[Any, Any, Any]:
        return reference.canonical_svd(cupy, *cupy.linalg.svd(x, full_matrices=False))

    shapes = [(a.dtype, (m, k)), (real, (k,)), (a.dtype, (k, n))]
    return _factor(ex, "linalg.svd", a, shapes, factorize)


__all__ = ["GemmType", "batched_matmul", "gemm_type", "matmul", "norm", "qr", "sum", "svd"]

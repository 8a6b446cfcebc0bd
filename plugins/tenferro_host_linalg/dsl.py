# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""The ``dsl`` variants: serial-loop kernels in the tenferro-host DSL (WebGPU, or any JIT).

The DSL has no shared memory yet, so each output element is one thread that loops over its
reduction: a GEMM thread walks ``k``, a reduction thread walks the reduced elements. Inputs
are read through their strides (any layout); outputs are compact column-major. Float dtypes
only (the DSL has no complex type; f16 would accumulate in f16): other dtypes the op accepts
are an ``UnsupportedError`` of this variant. Every thread accumulates in the operand dtype.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> a = cpu.upload(np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32))
>>> with cpu.session() as s:
...     matmul(tf.cpu.exec_session(s), a, a).download().tolist()
[[7.0, 10.0], [15.0, 22.0]]
"""

from __future__ import annotations

import math
from typing import Any

from tenferro_host import Tensor, UnsupportedError
from tenferro_host import kernel as K

from .checks import GEMM_DTYPES, SOLVER_DTYPES, accepted, gemm_dims, normalize_axes
from .views import compact, reshaped

#: Element types of the DSL variants (WebGPU stores float32 only).
DSL_DTYPES = ("float32", "float64")


@K.kernel
def gemm_kernel(out: K.Array[K.F], a: K.Array[K.F], b: K.Array[K.F]):
    """out[:, :, p] = a[:, :, p] @ b[:, :, p]: one thread per output element, a loop over k."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        m = out.shape[0]
        n = out.shape[1]
        r = i % m
        c = (i // m) % n
        p = i // (m * n)
        acc = K.F(0)
        for j in range(a.shape[1]):
            acc += a[r, j, p] * b[j, c, p]
        out[i] = acc


@K.kernel
def reduce_kernel(out: K.Array[K.F], x: K.Array[K.F], root_of_squares: K.Const[bool]):
    """out[i] = sum over j of x[i + j * out.len] (x compact (kept, reduced)); with
    ``root_of_squares`` the square root of the sum of squares (the 2-norm)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        acc = K.F(0)
        for j in range(x.len // out.len):
            v = x[i + j * out.len]
            if root_of_squares:
                acc += v * v
            else:
                acc += v
        if root_of_squares:
            out[i] = K.sqrt(acc)
        else:
            out[i] = acc


def _dsl_dtype(ex: Any, op: str, t: Tensor) -> None:
    """UnsupportedError for a dtype the op accepts but these kernels do not (f16, complex)."""
    if t.dtype.name not in DSL_DTYPES:
        raise UnsupportedError(
            f"{op}'s DSL variant on {ex.runtime.name} takes {', '.join(DSL_DTYPES)}, not "
            f"{t.dtype.name} (no complex type in the DSL; f16 would accumulate in f16); run "
            "it on the cpu or cuda backend",
            backend=ex.runtime.name,
            feature=t.dtype.name,
            op=op,
        )


def _as_batch(runtime: Any, t: Tensor) -> Tensor:
    """``t`` as a 3-D (rows, cols, batch) view: a unit batch appended, or batches flattened."""
    if t.ndim == 2:
        return Tensor(t.storage, t.dtype, (*t.shape, 1), (*t.strides, 1), t.offset)
    if t.ndim == 3:
        return t
    return reshaped(compact(runtime, t), (t.shape[0], t.shape[1], math.prod(t.shape[2:])))


def _gemm(ex: Any, op: str, a: Tensor, b: Tensor, batched: bool) -> Tensor:
    m, _, n, batch = gemm_dims(op, a, b, batched)
    _dsl_dtype(ex, op, a)
    runtime = ex.runtime
    with ex.jit(op) as js:
        out = js.alloc_output(a.dtype, (m, n, *batch))
        if out.numel:
            js.launch(
                gemm_kernel,
                js.cube_count_1d(out.numel),
                js.cube_dim_1d(),
                _as_batch(runtime, out),
                _as_batch(runtime, a),
                _as_batch(runtime, b),
            )
    return out


def matmul(ex: Any, a: Tensor, b: Tensor) -> Tensor:
    """``linalg.matmul`` with the DSL GEMM kernel."""
    return _gemm(ex, "linalg.matmul", a, b, batched=False)


def batched_matmul(ex: Any, a: Tensor, b: Tensor) -> Tensor:
    """``linalg.batched_matmul`` with the DSL GEMM kernel."""
    return _gemm(ex, "linalg.batched_matmul", a, b, batched=True)


def _reduce(ex: Any, op: str, x: Tensor, axes: tuple[int, ...], root: bool) -> Tensor:
    _dsl_dtype(ex, op, x)
    kept = [i for i in range(x.ndim) if i not in axes]
    shape = tuple(x.shape[i] for i in kept)
    if x.numel == 0:
        return ex.runtime.zeros(x.dtype, shape)
    grouped = compact(ex.runtime, x.permute(*kept, *axes))
    with ex.jit(op) as js:
        out = js.alloc_output(x.dtype, shape)
        js.launch(
            reduce_kernel,
            js.cube_count_1d(out.numel),
            js.cube_dim_1d(),
            out,
            grouped,
            root_of_squares=root,
        )
    return out


def sum(ex: Any, x: Tensor, axis: Any = None) -> Tensor:  # noqa: A001 - the op's name
    """``linalg.sum`` with the DSL reduction kernel."""
    accepted("linalg.sum", x, GEMM_DTYPES, "x")
    return _reduce(ex, "linalg.sum", x, normalize_axes("linalg.sum", axis, x.ndim), False)


def norm(ex: Any, x: Tensor) -> Tensor:
    """``linalg.norm`` with the DSL reduction kernel (root of the sum of squares)."""
    accepted("linalg.norm", x, SOLVER_DTYPES, "x")
    return _reduce(ex, "linalg.norm", x, tuple(range(x.ndim)), True)


__all__ = ["DSL_DTYPES", "batched_matmul", "gemm_kernel", "matmul", "norm", "reduce_kernel", "sum"]

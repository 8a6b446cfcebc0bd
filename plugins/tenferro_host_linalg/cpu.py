"""The ``cpu`` variants: numpy on zero-copy views, results stored in tensors of the runtime.

The factorizations refuse non-finite input before LAPACK runs (``require_finite``).
Inputs may be non-compact views (``CpuRuntime.strided_view`` exposes them without a copy);
every output is a fresh compact tensor of the session's runtime. The numerics are those of
the references (f16 accumulates in float32; QR and SVD in their canonical form).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenferro_host import Tensor
from tenferro_host.cpu import CpuRuntime

from . import reference
from .checks import (
    GEMM_DTYPES,
    SOLVER_DTYPES,
    accepted,
    gemm_dims,
    normalize_axes,
    require_finite,
    require_matrix,
)


def _store(ex: Any, values: Any) -> Tensor:
    """A fresh compact tensor of the session's runtime holding ``values``."""
    values = np.asarray(values)
    out = ex.runtime.empty(values.dtype, values.shape)
    if out.numel:
        CpuRuntime.strided_view(out)[...] = values
    return out


def _view(t: Tensor) -> np.ndarray:
    return CpuRuntime.strided_view(t)


def matmul(ex: Any, a: Tensor, b: Tensor) -> Tensor:
    """``linalg.matmul`` with numpy."""
    gemm_dims("linalg.matmul", a, b)
    return _store(ex, reference.matmul(_view(a), _view(b)))


def batched_matmul(ex: Any, a: Tensor, b: Tensor) -> Tensor:
    """``linalg.batched_matmul`` with numpy."""
    gemm_dims("linalg.batched_matmul", a, b, batched=True)
    return _store(ex, reference.batched_matmul(_view(a), _view(b)))


def sum(ex: Any, x: Tensor, axis: Any = None) -> Tensor:  # noqa: A001 - the op's name
    """``linalg.sum`` with numpy."""
    accepted("linalg.sum", x, GEMM_DTYPES, "x")
    axes = normalize_axes("linalg.sum", axis, x.ndim)
    return _store(ex, reference.sum(_view(x), axes))


def norm(ex: Any, x: Tensor) -> Tensor:
    """``linalg.norm`` with numpy."""
    accepted("linalg.norm", x, SOLVER_DTYPES, "x")
    return _store(ex, reference.norm(_view(x)))


def qr(ex: Any, a: Tensor) -> tuple[Tensor, Tensor]:
    """``linalg.qr`` with numpy, in the canonical form."""
    accepted("linalg.qr", a, SOLVER_DTYPES, "a")
    require_matrix("linalg.qr", a)
    require_finite("linalg.qr", _view(a))
    q, r = reference.qr(_view(a))
    return _store(ex, q), _store(ex, r)


def svd(ex: Any, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``linalg.svd`` with numpy, in the canonical form."""
    accepted("linalg.svd", a, SOLVER_DTYPES, "a")
    require_matrix("linalg.svd", a)
    require_finite("linalg.svd", _view(a))
    u, s, vh = reference.svd(_view(a))
    return _store(ex, u), _store(ex, s), _store(ex, vh)


__all__ = ["batched_matmul", "matmul", "norm", "qr", "sum", "svd"]

"""numpy references of every op, and the canonical forms that make QR and SVD unique.

A QR or SVD is unique only up to signs (phases, for complex): LAPACK and cuSOLVER may return
columns of opposite sign for the same input. Every variant and the reference therefore apply
one normalization, written once for numpy and CuPy alike (``xp`` is either module): ``R``
gets a real non-negative diagonal, and each left singular vector has its largest-magnitude
entry real and positive (the right singular vector takes the opposite phase, so ``U S Vh``
is unchanged). f16 references accumulate in float32, as cuBLAS does.

>>> import numpy as np
>>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
>>> q, r = qr(-a)
>>> bool(np.all(np.diag(r) >= 0)), bool(np.allclose(q @ r, -a))
(True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np


def widened(x: np.ndarray) -> np.ndarray:
    """float16 as float32 (the accumulation type of the f16 variants), others unchanged."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _phase(xp: Any, values: Any) -> Any:
    """``values / |values|`` with 1 where a value is 0, in the dtype of ``values``."""
    magnitude = xp.abs(values)
    safe = xp.where(magnitude == 0, 1, magnitude)
    return xp.where(magnitude == 0, 1, values / safe).astype(values.dtype)


def canonical_qr(xp: Any, q: Any, r: Any) -> tuple[Any, Any]:
    """(Q, R) with R's diagonal real and non-negative (unique for a full-rank input)."""
    if min(r.shape) == 0:
        return q, r
    phase = _phase(xp, xp.diagonal(r))
    return q * phase[None, :], r * xp.conj(phase)[:, None]


def canonical_svd(xp: Any, u: Any, s: Any, vh: Any) -> tuple[Any, Any, Any]:
    """(U, S, Vh) with each column of U's largest-magnitude entry real and positive."""
    k = s.shape[0]
    if k == 0 or u.shape[0] == 0:
        return u, s, vh
    rows = xp.argmax(xp.abs(u), axis=0)
    phase = _phase(xp, u[rows, xp.arange(k)])
    return u * xp.conj(phase)[None, :], s, vh * phase[:, None]


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The product of two matrices; vectors and stacks are refused, as the op refuses them."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"linalg.matmul takes two matrices, got shapes {a.shape} and {b.shape}")
    return np.matmul(widened(a), widened(b)).astype(a.dtype)


def batched_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The product of each pair of matrices along the trailing batch axes."""
    return np.einsum("ij...,jk...->ik...", widened(a), widened(b)).astype(a.dtype)


def tensordot(a: np.ndarray, b: np.ndarray, axes: Any = 2) -> np.ndarray:
    """NumPy's ``tensordot`` over ``axes``, in the operands' dtype."""
    return np.asarray(np.tensordot(widened(a), widened(b), axes)).astype(a.dtype)


def einsum(a: np.ndarray, b: np.ndarray, spec: str = "") -> np.ndarray:
    """NumPy's ``einsum`` of ``spec`` on two operands, in their dtype."""
    return np.asarray(np.einsum(spec, widened(a), widened(b))).astype(a.dtype)


def sum(x: np.ndarray, axis: Any = None) -> np.ndarray:  # noqa: A001 - the op's name
    """The sum over ``axis`` (None: every axis), in the input's dtype."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    return np.asarray(np.sum(widened(x), axis=axes)).astype(x.dtype)


def norm(x: np.ndarray) -> np.ndarray:
    """The Frobenius (2-) norm of all elements, in the real dtype of ``x``."""
    return np.asarray(np.linalg.norm(x)).astype(np.abs(np.zeros(0, x.dtype)).dtype)


def qr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reduced QR in its canonical form."""
    q, r = np.linalg.qr(a, mode="reduced")
    return canonical_qr(np, q, r)


def svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thin SVD in its canonical form."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return canonical_svd(np, u, s, vh)


__all__ = [
    "batched_matmul",
    "canonical_qr",
    "canonical_svd",
    "einsum",
    "matmul",
    "norm",
    "qr",
    "sum",
    "svd",
    "tensordot",
    "widened",
]

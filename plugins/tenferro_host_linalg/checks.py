"""Operand validation shared by every variant: dtypes, shapes and axes, as typed errors.

>>> import tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> gemm_dims("linalg.matmul", cpu.zeros("float32", (2, 3)), cpu.zeros("float32", (3, 4)))
(2, 3, 4, ())
>>> normalize_axes("linalg.sum", -1, 3)
(2,)
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from tenferro_host import DType, DTypeError, ShapeError, Tensor, ValidationError, dtype

#: Element types of the GEMM family and of ``sum`` (f16 accumulates in f32 on CUDA).
GEMM_DTYPES = ("float32", "float64", "float16", "complex64", "complex128")
#: Element types of the factorizations and of ``norm`` (LAPACK and cuSOLVER have no f16).
SOLVER_DTYPES = ("float32", "float64", "complex64", "complex128")


def real_dtype(dt: Any) -> DType:
    """The real counterpart of a dtype (complex64 -> float32); real dtypes map to themselves."""
    return dtype(np.abs(np.zeros(0, dtype(dt).numpy)).dtype)


def accepted(op: str, t: Tensor, dtypes: tuple[str, ...], argument: str) -> None:
    """DTypeError unless ``t`` has one of ``dtypes``."""
    if t.dtype.name not in dtypes:
        raise DTypeError(
            f"{argument} is {t.dtype.name}; {op} takes {', '.join(dtypes)}",
            argument=argument,
            op=op,
        )


def same_dtype(op: str, a: Tensor, b: Tensor, dtypes: tuple[str, ...] = GEMM_DTYPES) -> None:
    """Both operands of one accepted dtype (no implicit promotion)."""
    accepted(op, a, dtypes, "a")
    if a.dtype != b.dtype:
        raise DTypeError(
            f"a is {a.dtype.name} but b is {b.dtype.name}; cast one so both have one dtype",
            argument="b",
            op=op,
        )


def gemm_dims(
    op: str, a: Tensor, b: Tensor, batched: bool = False
) -> tuple[int, int, int, tuple[int, ...]]:
    """(m, k, n, batch) of ``a (m, k, *batch) @ b (k, n, *batch)``, column-major batches last.

    Without ``batched`` both operands must be matrices (2 dimensions).
    """
    same_dtype(op, a, b)
    for name, t in (("a", a), ("b", b)):
        if t.ndim < 2 or (t.ndim > 2 and not batched):
            want = "at least 2 dimensions" if batched else "2 dimensions; use "
            want += "" if batched else "linalg.batched_matmul for batches"
            raise ShapeError(
                f"{op} takes matrices ({want}), got {name} of shape {t.shape}",
                argument=name,
                op=op,
            )
    if a.shape[1] != b.shape[0]:
        raise ShapeError(
            f"a is {a.shape} and b is {b.shape}: a.shape[1] ({a.shape[1]}) must equal "
            f"b.shape[0] ({b.shape[0]})",
            argument="b",
            op=op,
        )
    if a.shape[2:] != b.shape[2:]:
        raise ShapeError(
            f"the batch dimensions differ: a {a.shape[2:]}, b {b.shape[2:]}; pass equal "
            "trailing batch dimensions (no broadcasting)",
            argument="b",
            op=op,
        )
    return a.shape[0], a.shape[1], b.shape[1], a.shape[2:]


def require_matrix(op: str, t: Tensor, argument: str = "a") -> tuple[int, int]:
    """(m, n) of a 2-D tensor, else ShapeError."""
    if t.ndim != 2:
        raise ShapeError(
            f"{op} takes a matrix (2 dimensions), got shape {t.shape}", argument=argument, op=op
        )
    return t.shape[0], t.shape[1]


def require_finite(op: str, values: np.ndarray, argument: str = "a") -> None:
    """ValidationError when ``values`` holds an inf or a NaN.

    LAPACK's SVD never returns on some non-finite inputs (it loops) and raises an untyped
    error on others, so the factorizations read their input on the host before calling it.
    """
    if values.size and not np.isfinite(values).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(values))[0])
        raise ValidationError(
            f"{argument}{list(where)} is {values[where].item()!r}; {op} needs finite input "
            "(replace inf and NaN before factorizing)",
            argument=argument,
            op=op,
        )


def normalize_axes(op: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence of ints) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if isinstance(axis, Integral) and not isinstance(axis, bool) else axis
    try:
        axes = list(items)
    except TypeError:
        axes = [None]
    if not all(isinstance(a, Integral) and not isinstance(a, bool) for a in axes):
        raise ValidationError(
            f"axis must be None, an int or a sequence of ints, got {axis!r}",
            argument="axis",
            op=op,
        )
    axes = [int(a) for a in axes]
    bad = [a for a in axes if not -ndim <= a < ndim]
    if bad:
        raise ValidationError(
            f"axis {bad[0]} is out of range for a tensor of {ndim} dimensions; "
            f"use -{ndim} .. {ndim - 1}",
            argument="axis",
            op=op,
        )
    normal = sorted(a % ndim for a in axes)
    if len(set(normal)) != len(normal):
        raise ValidationError(f"axis {axis!r} repeats an axis", argument="axis", op=op)
    return tuple(normal)


__all__ = [
    "GEMM_DTYPES",
    "SOLVER_DTYPES",
    "accepted",
    "gemm_dims",
    "normalize_axes",
    "real_dtype",
    "require_finite",
    "require_matrix",
    "same_dtype",
]

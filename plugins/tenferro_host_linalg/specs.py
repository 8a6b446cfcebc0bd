"""The OpSpecs of the package: signatures, references, tolerances and variants per backend.

Shape and dtype rules take the input shapes (dtypes) positionally and the op's attributes by
keyword, and give one value per output. Each op declares its inputs' dimensions (``shapes``)
and a tolerance rule: (rtol, atol) per dtype, grown by sqrt of the reduction length (the
contracted size of a GEMM, the summed elements of sum and norm, the column length of a
factorization): GEMMs and sums accumulate in another order than numpy, and cuSOLVER's factors
differ from LAPACK's in the last bits (more so for singular vectors, whose error grows with
1 / the singular value gap).

>>> MATMUL.signature.shape_rule((2, 3), (3, 4))
(2, 4)
>>> SUM.signature.shape_rule((2, 3, 4), axis=(0, 2))
(3,)
>>> EINSUM.signature.shape_rule((2, 3), (3, 5), spec="ij,jk->ki")
(5, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tenferro_host import OpSpec, Signature

from . import contraction, cpu, cuda, cupy_bridge, dsl, reference
from .checks import GEMM_DTYPES, SOLVER_DTYPES, normalize_axes, real_dtype

#: (rtol per dtype, atol per dtype) of each op, for every check against its reference.
TOLERANCES: dict[str, tuple[Mapping[str, float], Mapping[str, float]]] = {}
_GEMM_TOL = (
    {"float16": 1e-2, "float32": 1e-4, "float64": 1e-11, "complex64": 1e-4, "complex128": 1e-11},
    {"float16": 1e-2, "float32": 1e-4, "float64": 1e-11, "complex64": 1e-4, "complex128": 1e-11},
)
_FACTOR_TOL = (
    {"float32": 1e-3, "float64": 1e-9, "complex64": 1e-3, "complex128": 1e-9},
    {"float32": 1e-4, "float64": 1e-10, "complex64": 1e-4, "complex128": 1e-10},
)


def tolerance(op: str, dtype_name: str) -> tuple[float, float]:
    """(rtol, atol) of ``op`` for outputs of ``dtype_name``."""
    rtol, atol = TOLERANCES[op]
    return rtol[dtype_name], atol[dtype_name]


def _spec(
    name: str,
    signature: Signature,
    ref: Callable[..., Any],
    variants: Mapping[str, Callable[..., Any]],
    tol: tuple[Any, Any],
    doc: str,
    reduction_length: Callable[..., int],
    backward: Callable[..., Sequence[Any]] | None = None,
) -> OpSpec:
    TOLERANCES[name] = tol
    # Every cuda variant needs CuPy (the contractions through linalg.matmul): declared, so
    # caps/ops show its absence per variant and the host refuses before running.
    requirements = {"cuda-raw": cupy_bridge.CUPY} if "cuda-raw" in variants else {}
    return OpSpec(
        name=name,
        signature=signature,
        reference=ref,
        variants=variants,
        doc=doc,
        rtol=tol[0],
        atol=tol[1],
        reduction_length=reduction_length,
        variant_requirements=requirements,
        backward=backward,
    )


def _contraction_shape(
    a: tuple[int, ...], b: tuple[int, ...], labels: tuple[str, str], out: str
) -> tuple[int, ...]:
    sizes = dict(zip(labels[0] + labels[1], a + b, strict=True))
    return tuple(sizes[c] for c in out)


def _einsum_shape(a: tuple[int, ...], b: tuple[int, ...], spec: str = "") -> tuple[int, ...]:
    (la, lb), out = contraction.parse_spec(spec)
    return _contraction_shape(a, b, (la, lb), out)


def _tensordot_shape(a: tuple[int, ...], b: tuple[int, ...], axes: Any = 2) -> tuple[int, ...]:
    a_axes, b_axes = contraction.tensordot_axes(axes, len(a), len(b))
    return (
        *(d for i, d in enumerate(a) if i not in a_axes),
        *(d for j, d in enumerate(b) if j not in b_axes),
    )


def _einsum_dims(spec: str = "") -> dict[str, tuple[str, ...]] | None:
    """Each operand's dimensions named by its labels (a shared label is one size)."""
    try:
        (la, lb), _ = contraction.parse_spec(spec)
    except Exception:
        return None  # the op refuses the spec with a typed error; nothing to declare
    return {"a": tuple(la), "b": tuple(lb)}


def _einsum_length(a: tuple[int, ...], b: tuple[int, ...], spec: str = "") -> int:
    (la, lb), out = contraction.parse_spec(spec)
    sizes = dict(zip(la + lb, a + b, strict=True))
    return math.prod(size for c, size in sizes.items() if c not in out)


def _tensordot_dims(axes: Any = 2) -> dict[str, tuple[str, ...]] | None:
    """``axes=N``: the last N dimensions of a are the first N of b; other axes: undeclared."""
    if not isinstance(axes, int) or isinstance(axes, bool) or axes < 0:
        return None
    shared = tuple(f"c{i}" for i in range(axes))
    return {"a": ("*left", *shared), "b": (*shared, "*right")}


def _tensordot_length(a: tuple[int, ...], b: tuple[int, ...], axes: Any = 2) -> int:
    a_axes, _ = contraction.tensordot_axes(axes, len(a), len(b))
    return math.prod(a[i] for i in a_axes)


def _sum_length(x: tuple[int, ...], axis: Any = None) -> int:
    return math.prod(x[i] for i in normalize_axes("linalg.sum", axis, len(x)))


def _sum_shape(x: tuple[int, ...], axis: Any = None) -> tuple[int, ...]:
    axes = normalize_axes("linalg.sum", axis, len(x))
    return tuple(d for i, d in enumerate(x) if i not in axes)


#: What the factorizations' docs say about waits inside the vendor library.
_SOLVER_WAITS = (
    "On CUDA (cuSOLVER through CuPy) the host never waits, but cuSOLVER may block inside the "
    "library, and cupyx.errstate(linalg='raise') makes CuPy read devInfo (a wait) after each "
    "call; bench/linalg_bench.py counts the calls that blocked."
)


def _thin(a: tuple[int, ...]) -> int:
    return min(a[0], a[1])


#: The factorizations' input: one matrix of any shape.
_MATRIX = {"a": ("m", "n")}


def _column_length(a: tuple[int, ...]) -> int:
    """A factorization's rounding grows with the length of the columns it orthogonalizes."""
    return a[0]


def _everywhere(lowering: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """A contraction's variant is one lowering on every backend: it calls linalg.matmul /
    batched_matmul (and linalg.sum) through ex.run, which picks their variant."""
    return dict.fromkeys(("cpu", "cuda-raw", "dsl"), lowering)


def _matmul_backward(ops: Any, inputs: Any, outputs: Any, grads: Any) -> tuple[Any, Any]:
    """The gradients of a @ b: grad @ b.T for a, a.T @ grad for b (JAX's convention: no
    conjugate), through linalg.matmul itself, so the backward is differentiable in turn."""
    a, b = inputs
    (grad,) = grads
    matmul = ops("linalg.matmul")
    return matmul(grad, b.T), matmul(a.T, grad)


MATMUL = _spec(
    "linalg.matmul",
    Signature(
        inputs=("a", "b"),
        dtypes=GEMM_DTYPES,
        shape_rule=lambda a, b: (a[0], b[1]),
        shapes={"a": ("m", "k"), "b": ("k", "n")},
        samples=({"m": 512, "k": 512, "n": 512},),
    ),
    reference.matmul,
    {"cpu": cpu.matmul, "cuda-raw": cuda.matmul, "dsl": dsl.matmul},
    _GEMM_TOL,
    "Matrix product of column-major a (m, k) and b (k, n).",
    lambda a, b: a[1],
    _matmul_backward,
)
BATCHED_MATMUL = _spec(
    "linalg.batched_matmul",
    Signature(
        inputs=("a", "b"),
        dtypes=GEMM_DTYPES,
        shape_rule=lambda a, b: (a[0], b[1], *a[2:]),
        shapes={"a": ("m", "k", "*batch"), "b": ("k", "n", "*batch")},
        samples=({"m": 128, "k": 128, "n": 128, "batch": (16,)},),
    ),
    reference.batched_matmul,
    {"cpu": cpu.batched_matmul, "cuda-raw": cuda.batched_matmul, "dsl": dsl.batched_matmul},
    _GEMM_TOL,
    "a (m, k, *batch) @ b (k, n, *batch) per trailing batch index (column-major batches).",
    lambda a, b: a[1],
)
TENSORDOT = _spec(
    "linalg.tensordot",
    Signature(
        inputs=("a", "b"),
        attributes={"axes": object},
        dtypes=GEMM_DTYPES,
        shape_rule=_tensordot_shape,
        shapes=_tensordot_dims,
        sample_attributes={"axes": 1},
    ),
    reference.tensordot,
    _everywhere(contraction.tensordot),
    _GEMM_TOL,
    "numpy.tensordot: axes=N (last N of a with first N of b) or two axis sequences.",
    _tensordot_length,
)
EINSUM = _spec(
    "linalg.einsum",
    Signature(
        inputs=("a", "b"),
        attributes={"spec": str},
        dtypes=GEMM_DTYPES,
        shape_rule=_einsum_shape,
        shapes=_einsum_dims,
        sample_attributes={"spec": "ij,jk->ik"},
    ),
    reference.einsum,
    _everywhere(contraction.einsum),
    _GEMM_TOL,
    "A pairwise einsum ('ij,jk->ik'); einsum_chain contracts more operands pair by pair.",
    _einsum_length,
)
SUM = _spec(
    "linalg.sum",
    Signature(
        inputs=("x",),
        attributes={"axis": object},
        dtypes=GEMM_DTYPES,
        shape_rule=_sum_shape,
        shapes={"x": ("*dims",)},
    ),
    reference.sum,
    {"cpu": cpu.sum, "cuda-raw": cuda.sum, "dsl": dsl.sum},
    _GEMM_TOL,
    "Sum over axis (None: all; an int; a sequence of ints); f16 accumulates in float32.",
    _sum_length,
)
NORM = _spec(
    "linalg.norm",
    Signature(
        inputs=("x",),
        dtypes=SOLVER_DTYPES,
        dtype_rule=real_dtype,
        shape_rule=lambda x: (),
        shapes={"x": ("*dims",)},
    ),
    reference.norm,
    {"cpu": cpu.norm, "cuda-raw": cuda.norm, "dsl": dsl.norm},
    _GEMM_TOL,
    "The 2-norm (Frobenius) of all elements, real for complex input.",
    math.prod,
)
QR = _spec(
    "linalg.qr",
    Signature(
        inputs=("a",),
        outputs=("q", "r"),
        dtypes=SOLVER_DTYPES,
        dtype_rule=lambda a: (a, a),
        shape_rule=lambda a: ((a[0], _thin(a)), (_thin(a), a[1])),
        shapes=_MATRIX,
        samples=({"m": 512, "n": 256},),
    ),
    reference.qr,
    {"cpu": cpu.qr, "cuda-raw": cuda.qr},
    _FACTOR_TOL,
    "Reduced QR, R's diagonal real and non-negative (unique for full rank). " + _SOLVER_WAITS,
    _column_length,
)
SVD = _spec(
    "linalg.svd",
    Signature(
        inputs=("a",),
        outputs=("u", "s", "vh"),
        dtypes=SOLVER_DTYPES,
        dtype_rule=lambda a: (a, real_dtype(a), a),
        shape_rule=lambda a: ((a[0], _thin(a)), (_thin(a),), (_thin(a), a[1])),
        shapes=_MATRIX,
        samples=({"m": 512, "n": 256},),
    ),
    reference.svd,
    {"cpu": cpu.svd, "cuda-raw": cuda.svd},
    _FACTOR_TOL,
    "Thin SVD, descending s; each column of u has its largest entry real and positive. "
    + _SOLVER_WAITS,
    _column_length,
)
OPS = (MATMUL, BATCHED_MATMUL, TENSORDOT, EINSUM, SUM, NORM, QR, SVD)

__all__ = ["OPS", "TOLERANCES", "tolerance"]

"""Pairwise contractions lowered to permute + reshape + GEMM, on every backend alike.

``einsum`` and ``tensordot`` name the dimensions of both operands with labels; a label in both
operands and the output is a batch dimension, in both but not the output a contracted one.
Each operand is permuted to (free, contracted, batch) order, made compact on the device when
the permuted view is not (``runtime.canonicalize``), viewed as a matrix (or a batch of them)
and multiplied by ``linalg.matmul``/``linalg.batched_matmul`` through ``ex.run`` — so the same
lowering runs on CPU, CUDA (cuBLAS) and WebGPU (DSL), inside the caller's session. A label
only one operand has and the output lacks is summed away first (``linalg.sum``); when an
operand is empty the result is zeros, as numpy's (no product is summed, whatever the other
operand holds).

>>> import numpy as np, tenferro_host as tf
>>> host = tf.Host(); cpu = host.backend("cpu")
>>> a, b = cpu.upload(np.ones((2, 3))), cpu.upload(np.ones((3, 4)))
>>> host.run("linalg.einsum", a, b, spec="ij,jk->ki").download().shape
(4, 2)
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from numbers import Integral
from typing import Any

from tenferro_host import ShapeError, Tensor, ValidationError

from .checks import same_dtype
from .views import compact, reshaped

EINSUM = "linalg.einsum"
TENSORDOT = "linalg.tensordot"


def contract(
    ex: Any, op: str, a: Tensor, b: Tensor, a_labels: str, b_labels: str, out_labels: str
) -> Tensor:
    """``out[out_labels] = sum a[a_labels] * b[b_labels]`` over the labels the output lacks."""
    same_dtype(op, a, b)
    sizes = _label_sizes(op, (a, b), (a_labels, b_labels))
    if a.numel == 0 or b.numel == 0:
        # A sum over no terms is 0 even where the other operand holds inf or NaN (numpy's
        # value); summing a lone label first would multiply inf by that empty sum.
        return ex.runtime.zeros(a.dtype, tuple(sizes[c] for c in out_labels))
    a, a_labels = _sum_away(ex, a, a_labels, b_labels + out_labels)
    b, b_labels = _sum_away(ex, b, b_labels, a_labels + out_labels)
    batch = [c for c in a_labels if c in b_labels and c in out_labels]
    summed = [c for c in a_labels if c in b_labels and c not in out_labels]
    left = [c for c in a_labels if c not in b_labels]
    right = [c for c in b_labels if c not in a_labels]
    runtime = ex.runtime
    a_view = compact(runtime, a.permute(*[a_labels.index(c) for c in left + summed + batch]))
    b_view = compact(runtime, b.permute(*[b_labels.index(c) for c in summed + right + batch]))
    m, k, n = (math.prod(sizes[c] for c in group) for group in (left, summed, right))
    if batch:
        count = math.prod(sizes[c] for c in batch)
        product = ex.run(
            "linalg.batched_matmul",
            reshaped(a_view, (m, k, count)),
            reshaped(b_view, (k, n, count)),
        )
    else:
        product = ex.run("linalg.matmul", reshaped(a_view, (m, k)), reshaped(b_view, (k, n)))
    order = left + right + batch
    result = reshaped(product, [sizes[c] for c in order])
    return compact(runtime, result.permute(*[order.index(c) for c in out_labels]))


def _label_sizes(op: str, operands: Sequence[Tensor], labels: Sequence[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for name, t, lab in zip("ab", operands, labels, strict=True):
        if len(lab) != t.ndim:
            raise ShapeError(
                f"operand {name} has {t.ndim} dimensions but {len(lab)} labels ({lab!r})",
                argument=name,
                op=op,
            )
        for c, size in zip(lab, t.shape, strict=True):
            if sizes.setdefault(c, size) != size:
                raise ShapeError(
                    f"label {c!r} has size {sizes[c]} in one place and {size} in operand "
                    f"{name}; a label names one dimension size",
                    argument=name,
                    op=op,
                )
    return sizes


def _sum_away(ex: Any, t: Tensor, labels: str, elsewhere: str) -> tuple[Tensor, str]:
    """Sum the dimensions whose labels appear nowhere else, by ``linalg.sum``."""
    alone = tuple(i for i, c in enumerate(labels) if c not in elsewhere)
    if not alone:
        return t, labels
    kept = "".join(c for i, c in enumerate(labels) if i not in alone)
    return ex.run("linalg.sum", t, axis=alone), kept


# -- einsum ------------------------------------------------------------------------------------
def parse_spec(spec: Any, operands: int = 2) -> tuple[list[str], str]:
    """The input labels and output labels of an einsum spec of ``operands`` operands.

    >>> parse_spec("ij,jk->ik")
    (['ij', 'jk'], 'ik')
    >>> parse_spec("ba,ac")  # implicit output: labels seen once, sorted
    (['ba', 'ac'], 'bc')
    """
    if not isinstance(spec, str):
        raise ValidationError(
            f"spec must be an einsum string such as 'ij,jk->ik', got {type(spec).__name__}",
            argument="spec",
            op=EINSUM,
        )
    text = spec.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    inputs = lhs.split(",")
    if "." in text:
        raise ValidationError(
            f"spec {spec!r}: '...' is not supported; name every dimension with a letter",
            argument="spec",
            op=EINSUM,
        )
    if len(inputs) != operands or not all(c.isalpha() for c in lhs.replace(",", "") + out):
        raise ValidationError(
            f"spec {spec!r} must name {operands} operands with letters, e.g. 'ij,jk->ik'",
            argument="spec",
            op=EINSUM,
        )
    for lab in inputs:
        if len(set(lab)) != len(lab):
            raise ValidationError(
                f"spec {spec!r}: operand labels {lab!r} repeat a letter (diagonals and traces "
                "are not supported); use distinct labels",
                argument="spec",
                op=EINSUM,
            )
    seen = "".join(inputs)
    if not arrow:
        out = "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    if len(set(out)) != len(out) or any(c not in seen for c in out):
        raise ValidationError(
            f"spec {spec!r}: the output {out!r} must name distinct letters of the inputs",
            argument="spec",
            op=EINSUM,
        )
    return inputs, out


def einsum(ex: Any, a: Tensor, b: Tensor, spec: str = "") -> Tensor:
    """``linalg.einsum(a, b, spec=...)``: the pairwise contraction a spec describes."""
    (a_labels, b_labels), out = parse_spec(spec)
    return contract(ex, EINSUM, a, b, a_labels, b_labels, out)


def einsum_chain(ex: Any, spec: str, *operands: Tensor) -> Tensor:
    """A contraction of several operands, left to right, one ``linalg.einsum`` per pair.

    Each step keeps the labels a later operand or the output still needs, so ``ij,jk,kl->il``
    runs ``ij,jk->ik`` then ``ik,kl->il``, all inside the caller's exec session ``ex``.
    """
    if len(operands) < 2:
        raise ValidationError(
            f"einsum_chain needs at least 2 operands, got {len(operands)}",
            argument="operands",
            op=EINSUM,
        )
    labels, out = parse_spec(spec, len(operands))
    acc, acc_labels = operands[0], labels[0]
    for i in range(1, len(operands)):
        later = "".join(labels[i + 1 :]) + out
        pair = acc_labels + labels[i]
        step_out = (
            out if i == len(operands) - 1 else "".join(dict.fromkeys(c for c in pair if c in later))
        )
        acc = ex.run(EINSUM, acc, operands[i], spec=f"{acc_labels},{labels[i]}->{step_out}")
        acc_labels = step_out
    return acc


# -- tensordot ---------------------------------------------------------------------------------
def tensordot_axes(axes: Any, a_ndim: int, b_ndim: int) -> tuple[list[int], list[int]]:
    """NumPy's ``axes`` (an int N, or two sequences) as the contracted axes of a and b."""
    if isinstance(axes, Integral) and not isinstance(axes, bool):
        n = int(axes)
        if not 0 <= n <= min(a_ndim, b_ndim):
            raise ValidationError(
                f"axes={n} must be between 0 and {min(a_ndim, b_ndim)} for operands of "
                f"{a_ndim} and {b_ndim} dimensions",
                argument="axes",
                op=TENSORDOT,
            )
        return list(range(a_ndim - n, a_ndim)), list(range(n))
    try:
        a_axes, b_axes = (
            [axes_i] if isinstance(axes_i, Integral) else list(axes_i) for axes_i in axes
        )
    except (TypeError, ValueError):
        raise ValidationError(
            f"axes must be an int or a pair of axis sequences, got {axes!r}",
            argument="axes",
            op=TENSORDOT,
        ) from None
    out = []
    for name, got, ndim in (("a", a_axes, a_ndim), ("b", b_axes, b_ndim)):
        if not all(isinstance(x, Integral) and -ndim <= int(x) < ndim for x in got):
            raise ValidationError(
                f"axes for {name} {got!r} must be ints in range for {ndim} dimensions",
                argument="axes",
                op=TENSORDOT,
            )
        normal = [int(x) % ndim for x in got]
        if len(set(normal)) != len(normal):
            raise ValidationError(
                f"axes for {name} {got!r} repeat an axis", argument="axes", op=TENSORDOT
            )
        out.append(normal)
    if len(out[0]) != len(out[1]):
        raise ValidationError(
            f"axes {axes!r} name {len(out[0])} axes of a but {len(out[1])} of b; pair them",
            argument="axes",
            op=TENSORDOT,
        )
    return out[0], out[1]


def tensordot(ex: Any, a: Tensor, b: Tensor, axes: Any = 2) -> Tensor:
    """``linalg.tensordot(a, b, axes=...)``: numpy's tensordot (free axes of a, then of b)."""
    a_axes, b_axes = tensordot_axes(axes, a.ndim, b.ndim)
    if a.ndim + b.ndim > len(string.ascii_letters):
        raise ValidationError(
            f"tensordot supports up to {len(string.ascii_letters)} dimensions in all, "
            f"got {a.ndim + b.ndim}",
            argument="b",
            op=TENSORDOT,
        )
    letters = iter(string.ascii_letters)
    a_labels = [next(letters) for _ in range(a.ndim)]
    b_labels = [""] * b.ndim
    for i, j in zip(a_axes, b_axes, strict=True):
        b_labels[j] = a_labels[i]
    b_labels = [c or next(letters) for c in b_labels]
    out = [c for i, c in enumerate(a_labels) if i not in a_axes]
    out += [c for j, c in enumerate(b_labels) if j not in b_axes]
    return contract(ex, TENSORDOT, a, b, "".join(a_labels), "".join(b_labels), "".join(out))


__all__ = ["contract", "einsum", "einsum_chain", "parse_spec", "tensordot", "tensordot_axes"]

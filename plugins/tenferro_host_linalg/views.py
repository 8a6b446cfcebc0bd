"""Metadata-only tensor views the lowering needs: reshaping a compact column-major tensor.

A compact tensor's elements are at ``offset + linear index`` (column-major), so any shape with
the same element count is a view of it without moving data; a non-compact view is first made
compact on the device (``runtime.canonicalize``), never through the host.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> t = cpu.upload(np.arange(6.0).reshape(2, 3))  # column-major storage: 0 3 1 4 2 5
>>> reshaped(t, (3, 2)).download().tolist()
[[0.0, 4.0], [3.0, 2.0], [1.0, 5.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tenferro_host import ShapeError, Tensor
from tenferro_host.provider import compact_strides


def compact(runtime: Any, t: Tensor) -> Tensor:
    """``t`` itself when compact, else a compact device copy of it."""
    return t if t.is_compact() else runtime.canonicalize(t)


def reshaped(t: Tensor, shape: Sequence[int]) -> Tensor:
    """A compact tensor viewed with another shape of the same element count."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != t.numel:
        raise ShapeError(f"cannot view {t.shape} ({t.numel} elements) as {shape}", argument="shape")
    if not t.is_compact():
        raise ShapeError(
            f"only a compact tensor can be reshaped as a view, got strides {t.strides}; "
            "canonicalize it first",
            argument="t",
        )
    return Tensor(t.storage, t.dtype, shape, compact_strides(shape), t.offset)


__all__ = ["compact", "reshaped"]

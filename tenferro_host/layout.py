"""Column-major layout arithmetic: compact strides, compactness, storage spans.

Strides and offsets count elements, not bytes. *Compact* means column-major dense strides with
size-1 dimensions ignored (docs/contract.md).

>>> compact_strides((2, 3, 4))
(1, 2, 6)
>>> is_compact((2, 3), (3, 1))
False
>>> is_compact((1, 5), (7, 1))
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def numel(shape: Sequence[int]) -> int:
    """Number of elements of ``shape``."""
    return math.prod(shape)


def compact_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Column-major dense strides for ``shape``."""
    strides = []
    step = 1
    for dim in shape:
        strides.append(step)
        step *= max(dim, 1)
    return tuple(strides)


def is_compact(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when ``strides`` are column-major dense for ``shape`` (size-1 dimensions ignored)."""
    if numel(shape) == 0:
        return True
    expected = 1
    for dim, stride in zip(shape, strides, strict=True):
        if dim == 1:
            continue
        if stride != expected:
            return False
        expected *= dim
    return True


def span(shape: Sequence[int], strides: Sequence[int], offset: int) -> tuple[int, int]:
    """Half-open range ``[lo, hi)`` of storage elements a view touches (empty for numel 0)."""
    if numel(shape) == 0:
        return (offset, offset)
    lo = hi = offset
    for dim, stride in zip(shape, strides, strict=True):
        reach = (dim - 1) * stride
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return (lo, hi + 1)


__all__ = ["compact_strides", "is_compact", "numel", "span"]

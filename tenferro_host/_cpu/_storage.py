"""CPU storage: a flat numpy array, and the numpy view of a tensor on it."""

from __future__ import annotations

import numpy as np

from .. import Tensor
from ..provider import Runtime, Storage


class CpuStorage(Storage):
    """A flat numpy array; ``array`` has the dtype of the tensor that allocated it."""

    __slots__ = ("array",)

    def __init__(
        self, runtime: Runtime, array: np.ndarray, kind: str = "owned", read_only: bool = False
    ) -> None:
        Storage.__init__(self, runtime, array.nbytes, kind, read_only)  # no super() object
        self.array = array


def numpy_view(t: Tensor) -> np.ndarray:
    """:meth:`CpuRuntime.strided_view` without the recording's refusal (the seam's view)."""
    if 0 in t.shape:
        return np.empty(t.shape, dtype=t.dtype.numpy)
    assert isinstance(t.storage, CpuStorage)
    whole = t.storage.array
    if (
        t.strides == (1,)
        and t.offset == 0
        and whole.shape == t.shape
        and whole.dtype is t.dtype.numpy
    ):
        return whole.view()  # a 1-D tensor of its whole storage: a plain view, no layout
    isz = t.dtype.itemsize
    # One C call (as_strided costs several Python frames); the buffer bounds are checked.
    return np.ndarray(
        t.shape,
        t.dtype.numpy,
        buffer=whole,
        offset=t.offset * isz,
        strides=tuple(map(isz.__mul__, t.strides)),  # element -> byte strides, in C
    )


__all__ = ["CpuStorage", "numpy_view"]

"""Helpers for the DSL tests: describe numpy arguments, specialize and run on the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np

from tenferro_host import dtypes, layout
from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import ArrayArg, run


def as_arg(value: Any) -> Any:
    """A compact 1-D numpy array -> ArrayArg over the same memory; anything else unchanged."""
    if isinstance(value, np.ndarray):
        assert value.ndim == 1 and value.flags.c_contiguous
        return ArrayArg(value, 0, value.shape, (1,))
    return value


def desc(value: Any) -> K.ArrayDesc | K.ScalarDesc:
    if isinstance(value, ArrayArg):
        compact = layout.is_compact(value.shape, value.strides)
        return K.ArrayDesc(dtypes.dtype(value.storage.dtype), len(value.shape), compact)
    if isinstance(value, np.generic):
        return K.ScalarDesc(dtypes.dtype(value.dtype))
    return K.ScalarDesc()


def specialize(kern: K.Kernel, *args: Any, target: str = "cpu", **constants: Any):
    return kern.specialize([desc(as_arg(a)) for a in args], constants, target)


def launch(kern: K.Kernel, n: int, *args: Any, dim: int = 32, **constants: Any) -> None:
    """Run ``kern`` with at least ``n`` threads in 1-D cubes of ``dim``."""
    converted = [as_arg(a) for a in args]
    spec = kern.specialize([desc(a) for a in converted], constants, "cpu")
    run(spec, (max(1, -(-n // dim)), 1, 1), (dim, 1, 1), converted)

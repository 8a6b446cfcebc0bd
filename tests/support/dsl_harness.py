"""Helpers for the DSL tests: describe numpy arguments, specialize and run on the interpreter."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass
class View:
    """A view of a flat storage (offset, shape, strides in elements); views sharing one
    ``storage`` object alias (the WebGPU and CUDA harnesses run them on both targets)."""

    storage: np.ndarray
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @classmethod
    def compact(cls, array: np.ndarray) -> View:
        flat = np.asarray(array).reshape(-1, order="F").copy()
        strides = []
        step = 1
        for d in array.shape:
            strides.append(step)
            step *= max(d, 1)
        return cls(flat, 0, tuple(array.shape), tuple(strides))


def desc(value: Any) -> K.ArrayDesc | K.ScalarDesc:
    """The argument description of an array (an :class:`ArrayArg` or a :class:`View`) or a
    scalar (a numpy scalar is typed, a Python number is not)."""
    if isinstance(value, (ArrayArg, View)):
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

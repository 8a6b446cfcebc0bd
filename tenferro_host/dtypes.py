"""Element types shared by every backend and by the kernel DSL.

A :class:`DType` is a small value object; the module-level constants (``float32`` ...) are the
only instances. ``dtype(x)`` accepts a DType, its name, or anything ``numpy.dtype`` accepts.

>>> from tenferro_host import dtypes
>>> dtypes.dtype("float32").itemsize
4
>>> dtypes.dtype(dtypes.float64) is dtypes.float64
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import DTypeError


@dataclass(frozen=True, eq=False)
class DType:
    """One element type: its name, numpy twin, size in bytes and category."""

    name: str
    numpy: np.dtype[Any]
    itemsize: int
    category: str  # "float" | "int" | "uint" | "bool" | "complex"

    @property
    def is_float(self) -> bool:
        """A floating-point type."""
        return self.category == "float"

    @property
    def is_integer(self) -> bool:
        """A signed or unsigned integer type."""
        return self.category in ("int", "uint")

    def __repr__(self) -> str:
        return f"tenferro_host.{self.name}"

    def __reduce__(self) -> str:
        return self.name


def _make(name: str, category: str) -> DType:
    npd = np.dtype("bool" if name == "bool" else name)
    return DType(name, npd, npd.itemsize, category)


float32 = _make("float32", "float")
float64 = _make("float64", "float")
float16 = _make("float16", "float")
int32 = _make("int32", "int")
uint32 = _make("uint32", "uint")
int64 = _make("int64", "int")
bool_ = _make("bool", "bool")
complex64 = _make("complex64", "complex")
complex128 = _make("complex128", "complex")

ALL: tuple[DType, ...] = (
    float32,
    float64,
    float16,
    int32,
    uint32,
    int64,
    bool_,
    complex64,
    complex128,
)
_BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.numpy: d for d in ALL}


def dtype(value: Any) -> DType:
    """Resolve ``value`` (DType, name, numpy dtype or scalar type) to a DType, or DTypeError."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is None:  # numpy would read None as float64
        raise DTypeError(f"a dtype is required; use one of {', '.join(_BY_NAME)}", argument="dtype")
    try:
        npd = np.dtype(value)
    except TypeError as exc:
        raise DTypeError(
            f"{value!r} is not a dtype; use one of {', '.join(_BY_NAME)}", argument="dtype"
        ) from exc
    found = _BY_NUMPY.get(npd)
    if found is None:
        raise DTypeError(
            f"dtype {npd} is not supported; use one of {', '.join(_BY_NAME)}", argument="dtype"
        )
    return found


__all__ = [
    "ALL",
    "DType",
    "bool_",
    "complex64",
    "complex128",
    "dtype",
    "float16",
    "float32",
    "float64",
    "int32",
    "int64",
    "uint32",
]

"""Launch configurations and typed kernel scalars.

Kernel arguments are never bare Python numbers: a typed scalar (``i32(8)``, ``f32(0.5)`` ...)
says how many bytes the kernel receives, so the launch check can compare it with the kernel's
parameter layout. A scalar holds its value as a numpy scalar of that width — what cuda.core's
``launch`` packs (it would pack a bare Python int as a pointer).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tenferro_host import InvalidLaunchConfigError, ValidationError
from tenferro_host.provider import Memo, MemoKind, memo


def _dim3(value: Any, argument: str) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        dims: tuple[Any, ...] = (value,)
    elif isinstance(value, (tuple, list)):
        dims = tuple(value)
    else:
        dims = ()
    if not 1 <= len(dims) <= 3 or not all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims
    ):
        raise InvalidLaunchConfigError(
            f"{argument} must be an int or 1-3 ints, got {value!r}", argument=argument
        )
    if any(d <= 0 for d in dims):
        raise InvalidLaunchConfigError(
            f"{argument} dimensions must be positive, got {value!r}", argument=argument
        )
    padded = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    return padded  # type: ignore[return-value]


@dataclass(frozen=True, init=False)
class LaunchConfig:
    """Grid and block sizes (1-3 dims) and dynamic shared memory; types and positivity only.

    Device and per-function limits are checked at launch (``InvalidLaunchConfigError``).

    >>> LaunchConfig.flat(1000, 256)
    LaunchConfig(grid=(4, 1, 1), block=(256, 1, 1), shared_mem_bytes=0)
    """

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem_bytes: int

    def __init__(self, grid: Any, block: Any, shared_mem_bytes: int = 0) -> None:
        if not isinstance(shared_mem_bytes, (int, np.integer)) or shared_mem_bytes < 0:
            raise InvalidLaunchConfigError(
                f"shared_mem_bytes must be a non-negative int, got {shared_mem_bytes!r}",
                argument="shared_mem_bytes",
            )
        object.__setattr__(self, "grid", _dim3(grid, "grid"))
        object.__setattr__(self, "block", _dim3(block, "block"))
        object.__setattr__(self, "shared_mem_bytes", int(shared_mem_bytes))
        object.__setattr__(self, "_hash", hash((self.grid, self.block, self.shared_mem_bytes)))

    def __hash__(self) -> int:  # precomputed: launches look configs up in caches
        return self._hash  # type: ignore[attr-defined]

    @classmethod
    def flat(cls, n: int, block: int = 256, smem: int = 0) -> LaunchConfig:
        """A 1-D config covering ``n`` threads (``n == 0`` is an error: nothing to launch)."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n <= 0:
            raise InvalidLaunchConfigError(
                f"LaunchConfig.flat needs n > 0 threads, got {n!r}; skip the launch when "
                "there is no work",
                argument="n",
            )
        if not isinstance(block, (int, np.integer)) or block <= 0:
            raise InvalidLaunchConfigError(
                f"block must be a positive int, got {block!r}", argument="block"
            )
        key = (int(n), int(block), smem)
        found = _FLAT.get(key) if type(smem) is int else None
        if found is None:  # configs are values: one per (n, block, smem) is enough
            found = cls(-(-key[0] // key[1]), key[1], smem)
            if type(smem) is int:
                _FLAT.put(key, found)
        return found

    @property
    def threads_per_block(self) -> int:
        """Threads in one block: the product of ``block``."""
        return self.block[0] * self.block[1] * self.block[2]

    def __str__(self) -> str:
        return f"grid={self.grid} block={self.block} smem={self.shared_mem_bytes}"


_FLAT: Memo[tuple[int, int, int], LaunchConfig] = memo(
    "cuda.flat_configs", 1024, what="LaunchConfig.flat configs by (n, block, smem)"
)
#: Per scalar type, the instances made from plain ints (one memo per type).
SCALARS_BY_INT = MemoKind(
    "cuda.scalars_by_int", 4096, what="typed scalars made from ints, per type"
)


class Scalar:
    """A typed kernel scalar; subclasses fix the C type (``code`` is its struct format)."""

    __slots__ = ("_arg", "_value")
    code: ClassVar[str]
    numpy_type: ClassVar[type]
    c_name: ClassVar[str]
    _range: ClassVar[tuple[int, int]]  # integer types: [min, max]
    _session: ClassVar[None] = None  # scalars belong to no session
    #: instances made from plain ints, by value: a scalar is immutable, so ``i32(n)`` in a hot
    #: loop converts and range-checks ``n`` once
    _by_int: ClassVar[Memo[int, Scalar]]
    _value: Any
    _arg: tuple[str, Any, None]

    def __new__(cls, value: Any) -> Scalar:
        """The scalar of ``value``; plain ints reuse the instance made for that value."""
        exact_int = type(value) is int
        if exact_int:
            found = cls._by_int.get(value)
            if found is not None:
                return found
        self = object.__new__(cls)
        self._value = cls.numpy_type(self._convert(value))
        self._arg = (cls.code, self._value, None)  # (struct code, value, owner) for launches
        if exact_int:
            cls._by_int.put(value, self)
        return self

    def _convert(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValidationError(
                f"{type(self).__name__} takes an int, got {value!r}", argument="value"
            )
        lo, hi = self._range
        if not lo <= int(value) <= hi:
            raise ValidationError(
                f"{value} does not fit {self.c_name} [{lo}, {hi}]", argument="value"
            )
        return int(value)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            cls._by_int = SCALARS_BY_INT.new()
            if issubclass(cls.numpy_type, np.integer):  # the range, once per type
                info = np.iinfo(cls.numpy_type)
                cls._range = (int(info.min), int(info.max))

    @property
    def value(self) -> Any:
        """The value as a Python number."""
        return self._value.item()

    @property
    def nbytes(self) -> int:
        """Size of the C type in bytes (what the kernel parameter takes)."""
        return struct.calcsize(self.code)

    def numpy(self) -> np.generic:
        """The value as a numpy scalar of the right width (what cuda.core's launch packs)."""
        value: np.generic = self._value
        return value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class _Float(Scalar):
    __slots__ = ()

    def _convert(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValidationError(
                f"{type(self).__name__} takes a real number, got {value!r}", argument="value"
            )
        return value


class i32(Scalar):  # noqa: N801 - C type names
    """A C ``int`` kernel argument (32-bit signed)."""

    __slots__ = ()
    code, numpy_type, c_name = "i", np.int32, "int"


class u32(Scalar):  # noqa: N801
    """A C ``unsigned int`` kernel argument (32-bit)."""

    __slots__ = ()
    code, numpy_type, c_name = "I", np.uint32, "unsigned int"


class i64(Scalar):  # noqa: N801
    """A C ``long long`` kernel argument (64-bit signed)."""

    __slots__ = ()
    code, numpy_type, c_name = "q", np.int64, "long long"


class u64(Scalar):  # noqa: N801
    """A C ``unsigned long long`` kernel argument (64-bit)."""

    __slots__ = ()
    code, numpy_type, c_name = "Q", np.uint64, "unsigned long long"


class f32(_Float):  # noqa: N801
    """A C ``float`` kernel argument."""

    __slots__ = ()
    code, numpy_type, c_name = "f", np.float32, "float"


class f64(_Float):  # noqa: N801
    """A C ``double`` kernel argument."""

    __slots__ = ()
    code, numpy_type, c_name = "d", np.float64, "double"


class f16(_Float):  # noqa: N801
    """A CUDA ``__half`` kernel argument."""

    __slots__ = ()
    code, numpy_type, c_name = "e", np.float16, "__half"


class bool_(Scalar):  # noqa: N801
    """A C++ ``bool`` kernel argument; takes only a bool."""

    __slots__ = ()
    code, numpy_type, c_name = "?", np.bool_, "bool"

    def _convert(self, value: Any) -> Any:
        if not isinstance(value, (bool, np.bool_)):
            raise ValidationError(f"bool_ takes a bool, got {value!r}", argument="value")
        return bool(value)


SCALAR_TYPES = (i32, u32, i64, u64, f32, f64, f16, bool_)


__all__ = [
    "SCALAR_TYPES",
    "LaunchConfig",
    "Scalar",
    "bool_",
    "f16",
    "f32",
    "f64",
    "i32",
    "i64",
    "u32",
    "u64",
]

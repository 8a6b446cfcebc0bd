"""``@K.kernel`` and specialization: one kernel object, typed IR per (types, constants, target).

A :class:`Kernel` is what the decorator returns. ``kernel.specialize(...)`` resolves the generics
``K.F``/``K.I`` from argument descriptions, folds compile-time constants, type-checks the body and
caches the resulting :class:`Specialization` per (dtypes + ndims, constants, target, features) in
a bounded LRU cache (``kernel.cache_info()``).
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._memo import Memo, MemoKind
from ..dtypes import DType
from ..errors import DslError, DTypeError, ValidationError
from . import lang
from ._frontend import DeviceFunction, ParamDecl, ParsedKernel
from ._lowering import lower
from .ir import KernelIR, Param

DEFAULT_CACHE_SIZE = 64


@dataclass(frozen=True)
class ArrayDesc:
    """What specialization needs to know about an array argument: element type, rank and
    whether the view is compact (column-major dense, :meth:`Tensor.is_compact`), which decides
    what a linear index ``a[k]`` means (see the DSL guide, "Indexing")."""

    dtype: DType
    ndim: int
    compact: bool = True


@dataclass(frozen=True)
class ScalarDesc:
    """A scalar argument; ``dtype`` is None for a plain Python number (it takes the parameter's
    type), or the dtype of a numpy scalar (which may bind a generic no array binds)."""

    dtype: DType | None = None


ArgDesc = ArrayDesc | ScalarDesc


@dataclass(frozen=True)
class Specialization:
    """One kernel, fully typed for a target: what every code generator and the interpreter take.

    ``params`` are the runtime parameters in declaration order (name, kind, dtype, ndim);
    ``constants`` the compile-time constant values by name; ``key`` the cache key, unique
    across kernels, so backends may key compiled code on it; ``bounds`` the kernel's
    ``(max_units, min_resident)`` (:func:`kernel`), or None.
    """

    kernel_name: str
    ir: KernelIR
    constants: tuple[tuple[str, Any], ...]
    target: str
    features: tuple[str, ...]
    key: tuple[Any, ...]
    bounds: tuple[int, int] | None = None

    @property
    def params(self) -> tuple[Param, ...]:
        return self.ir.params


MAX_CUBE_UNITS = 1024
"""The most units a cube may have on any target (CUDA's limit per block)."""

#: Each kernel's specializations (LRU, its ``cache_size``) and the argument descriptions as given
#: mapped to their resolved key (4x ``cache_size``, emptied whole).
SPECIALIZATIONS = MemoKind(
    "kernel.specializations", DEFAULT_CACHE_SIZE, lru=True, what="a kernel's specializations"
)
SPECIALIZATION_KEYS = MemoKind(
    "kernel.specialization_keys", 4 * DEFAULT_CACHE_SIZE, what="given arguments -> resolved key"
)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


def _const_value(decl: ParamDecl, value: Any, kernel: str) -> Any:
    """``value`` checked against ``K.Const[T]`` and normalised to a Python scalar."""
    assert isinstance(decl.annotation, lang.ConstType)
    vt = decl.annotation.value_type
    if isinstance(value, np.generic):
        value = value.item()
    if vt is bool:
        ok = isinstance(value, bool)
    elif vt is int or (isinstance(vt, lang.ScalarType) and vt.dtype.is_integer):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif vt is float or (isinstance(vt, lang.ScalarType) and vt.dtype.is_float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and isinstance(vt, lang.ScalarType):
            try:
                value = float(value)
            except OverflowError:
                ok = False
    else:  # K.Const[K.bool_]
        ok = isinstance(value, bool)
    if not ok:
        raise ValidationError(
            f"constant {decl.name!r} of kernel {kernel!r} is declared {decl.annotation!r} but got "
            f"{_shown(value)}; pass a value of that type",
            argument=decl.name,
        )
    if isinstance(vt, lang.ScalarType) and vt.dtype.is_integer:
        info = np.iinfo(vt.dtype.numpy)
        if not info.min <= value <= info.max:
            raise ValidationError(
                f"constant {decl.name!r}={value} does not fit {vt!r}", argument=decl.name
            )
    if isinstance(vt, lang.ScalarType) and vt.dtype.is_float:
        with np.errstate(over="ignore"):
            value = float(vt.dtype.numpy.type(value))
    if vt is float and isinstance(value, int) and not -(2**1024) < value < 2**1024:
        raise ValidationError(
            f"constant {decl.name!r} ({_shown(value)}) is too large for any float type; pass a "
            "float",
            argument=decl.name,
        )
    return value


def _shown(value: Any) -> str:
    """``value`` for a message: a huge int by its size, not its 400 digits."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an int of {len(str(abs(value)))} digits"
    return repr(value)


_kernel_tokens = itertools.count(1)


def _given(
    arg_descs: Sequence[ArgDesc],
    constants: Mapping[str, Any] | None,
    target: str,
    features: Sequence[str],
) -> tuple[Any, ...]:
    """The specialization cache's key for the arguments as given."""
    consts = tuple((k, type(v), v) for k, v in constants.items()) if constants else ()
    return (tuple(arg_descs), consts, target, tuple(features))


class Kernel:
    """A DSL kernel: launch it through a JIT session; Python never runs its body."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_units: int | None = None,
        min_resident: int = 1,
    ) -> None:
        for name, value, low, high in (
            ("cache_size", cache_size, 1, None),
            ("max_units", 1 if max_units is None else max_units, 1, MAX_CUBE_UNITS),
            ("min_resident", min_resident, 1, 32),
        ):
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < low
                or (high is not None and value > high)
            ):
                raise ValidationError(
                    f"@K.kernel({name}=...) is {_OPTIONS[name]}; it needs an int "
                    + (f">= {low}" if high is None else f"from {low} to {high}")
                    + f", got {value!r}",
                    argument=name,
                )
        #: (most units per cube, cubes a CUDA multiprocessor should hold): the registers a unit
        #: may use follow (CUDA's ``__launch_bounds__``); a larger cube is refused at launch
        self.bounds = None if max_units is None else (max_units, min_resident)
        self.parsed = ParsedKernel(fn)
        functools.update_wrapper(self, fn)
        self.name = fn.__name__
        self.runtime_params = tuple(d for d in self.parsed.params if not d.is_const)
        self.shared_size_args = self.parsed.shared_size_args(self.runtime_params)
        self.const_params = tuple(d for d in self.parsed.params if d.is_const)
        self._cache: Memo[tuple[Any, ...], Specialization] = SPECIALIZATIONS.new(cache_size)
        self._cache_size = cache_size
        #: (descs, constants, target, features) as given -> the resolved cache key
        self._keys: Memo[tuple[Any, ...], tuple[Any, ...]] = SPECIALIZATION_KEYS.new(4 * cache_size)
        self._token = next(_kernel_tokens)  # never reused, unlike id(): keys compiled code

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DslError(
            f"kernel {self.name!r} cannot be called from Python; launch it in a JIT session: "
            f"js.launch({self.name}, count, dim, *args)"
        )

    def __repr__(self) -> str:
        return f"<K.kernel {self.name} ({self.parsed.filename}:{self.parsed.func.lineno})>"

    # -------------------------------------------------------- resolution

    def resolve(  # noqa: C901 - one check per (annotation, argument) kind, each its own error
        self, arg_descs: Sequence[ArgDesc], constants: Mapping[str, Any]
    ) -> tuple[tuple[Param, ...], dict[str, DType], dict[str, Any]]:
        """Runtime params with concrete dtypes, the generic bindings, the constant values."""
        if len(arg_descs) != len(self.runtime_params):
            names = ", ".join(d.name for d in self.runtime_params)
            raise ValidationError(
                f"kernel {self.name!r} takes {len(self.runtime_params)} runtime argument(s) "
                f"({names}), got {len(arg_descs)}; compile-time constants go by keyword"
            )
        generics: dict[str, DType] = {}
        bound_by: dict[str, str] = {}

        def bind(generic: lang.GenericType, dtype: DType, param: str) -> None:
            if not generic.accepts(dtype):
                raise DTypeError(
                    f"parameter {param!r} of kernel {self.name!r} is K.{generic.name} (a "
                    f"{generic.category} type) but got {dtype.name}",
                    argument=param,
                )
            have = generics.setdefault(generic.name, dtype)
            if have is not dtype:
                raise DTypeError(
                    f"K.{generic.name} is {have.name} (from {bound_by[generic.name]!r}) but "
                    f"{param!r} is {dtype.name}; every K.{generic.name} parameter shares one "
                    "dtype: convert one argument",
                    argument=param,
                )
            bound_by.setdefault(generic.name, param)

        for decl, desc in zip(self.runtime_params, arg_descs, strict=True):
            ann = decl.annotation
            if isinstance(ann, lang.ArrayType):
                if not isinstance(desc, ArrayDesc):
                    raise ValidationError(
                        f"parameter {decl.name!r} of kernel {self.name!r} is an array; pass a "
                        "Tensor or a binding, not a scalar",
                        argument=decl.name,
                    )
                if isinstance(ann.element, lang.GenericType):
                    bind(ann.element, desc.dtype, decl.name)
                elif ann.element.dtype is not desc.dtype:
                    raise DTypeError(
                        f"parameter {decl.name!r} of kernel {self.name!r} is {ann!r} but got "
                        f"{desc.dtype.name}",
                        argument=decl.name,
                    )
            elif not isinstance(desc, ScalarDesc):
                raise ValidationError(
                    f"parameter {decl.name!r} of kernel {self.name!r} is a scalar ({ann!r}); "
                    "pass a Python or numpy number, not a tensor",
                    argument=decl.name,
                )
        for decl, desc in zip(self.runtime_params, arg_descs, strict=True):
            ann = decl.annotation
            if (
                isinstance(ann, lang.GenericType)
                and isinstance(desc, ScalarDesc)
                and desc.dtype is not None
                and ann.name not in generics
            ):
                bind(ann, desc.dtype, decl.name)
        params = []
        for decl, desc in zip(self.runtime_params, arg_descs, strict=True):
            ann = decl.annotation
            element = ann.element if isinstance(ann, lang.ArrayType) else ann
            assert isinstance(element, (lang.ScalarType, lang.GenericType))
            if isinstance(element, lang.GenericType):
                if element.name not in generics:
                    raise DTypeError(
                        f"cannot resolve K.{element.name} for parameter {decl.name!r} of kernel "
                        f"{self.name!r}: no array binds it; pass a numpy scalar with a dtype "
                        "(e.g. np.float32(2.0))",
                        argument=decl.name,
                    )
                dtype = generics[element.name]
            else:
                dtype = element.dtype
            if isinstance(ann, lang.ArrayType):
                assert isinstance(desc, ArrayDesc)
                params.append(Param(decl.name, "array", dtype, desc.ndim, desc.compact))
            else:
                params.append(Param(decl.name, "scalar", dtype))
        return tuple(params), generics, self._constants(constants)

    def _constants(self, given: Mapping[str, Any]) -> dict[str, Any]:
        known = {d.name for d in self.const_params}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValidationError(
                f"kernel {self.name!r} has no compile-time constant {unknown[0]!r}; its "
                f"constants are: {', '.join(sorted(known)) or 'none'}",
                argument=unknown[0],
            )
        values = {}
        for decl in self.const_params:
            if decl.name in given:
                value = given[decl.name]
            elif decl.default is not inspect.Parameter.empty:
                value = decl.default
            else:
                raise ValidationError(
                    f"kernel {self.name!r} needs the compile-time constant {decl.name!r} "
                    f"({decl.annotation!r}) by keyword at launch",
                    argument=decl.name,
                )
            values[decl.name] = _const_value(decl, value, self.name)
        return values

    # -------------------------------------------------------- specialization

    def specialize(
        self,
        arg_descs: Sequence[ArgDesc],
        constants: Mapping[str, Any] | None = None,
        target: str = "cpu",
        features: Sequence[str] = (),
    ) -> Specialization:
        """The typed IR for these argument types and constants on ``target`` (cached).

        The cache is consulted before :meth:`resolve`: the argument descriptions as given map to
        the resolved key, so a repeated launch costs two dict lookups (the LRU order and bound
        are the resolved cache's).
        """
        given = _given(arg_descs, constants, target, features)
        try:
            key = self._keys.get(given)
            hashable = True
        except TypeError:  # an unhashable constant: resolve, then the resolved key is used
            key, hashable = None, False
        if key is not None:
            found = self._cache.get(key)
            if found is not None:
                return found
        spec = self._specialize(arg_descs, constants or {}, target, features, key is None)
        if hashable:
            self._keys.put(given, spec.key)
        return spec

    def is_specialized(
        self,
        arg_descs: Sequence[ArgDesc],
        constants: Mapping[str, Any] | None,
        target: str,
        features: Sequence[str] = (),
    ) -> bool:
        """Whether :meth:`specialize` of these arguments is a cache hit (a capture asks)."""
        given = _given(arg_descs, constants, target, features)
        try:
            key = self._keys.peek(given)
        except TypeError:  # an unhashable constant: specialize resolves it every time
            return False
        return key is not None and key in self._cache

    def _specialize(
        self,
        arg_descs: Sequence[ArgDesc],
        constants: Mapping[str, Any],
        target: str,
        features: Sequence[str],
        look_up: bool = True,
    ) -> Specialization:
        params, generics, values = self.resolve(arg_descs, constants)
        const_key = tuple((k, type(v).__name__, v) for k, v in sorted(values.items()))
        key = (
            self._token,
            tuple((p.kind, p.dtype.name, p.ndim, p.compact) for p in params),
            const_key,
            target,
            tuple(sorted(features)),
        )
        found = self._cache.get(key) if look_up else None  # (a miss already counted if not)
        if found is not None:
            return found
        spec = Specialization(
            kernel_name=self.name,
            ir=lower(self.parsed, generics, params, values),
            constants=tuple(sorted(values.items())),
            target=target,
            features=tuple(sorted(features)),
            key=key,
            bounds=self.bounds,
        )
        return self._cache.put(key, spec)

    def cache_info(self) -> CacheInfo:
        s = self._cache.stats()
        return CacheInfo(s.hits, s.misses, s.bound, s.size)

    def cache_clear(self) -> None:
        self._cache.reset()
        self._keys.reset()


def kernel(
    fn: Callable[..., Any] | None = None,
    *,
    cache_size: int = DEFAULT_CACHE_SIZE,
    max_units: int | None = None,
    min_resident: int = 1,
) -> Any:
    """Decorate a function as a DSL kernel (``@K.kernel`` or ``@K.kernel(cache_size=8)``).

    ``max_units`` bounds its cubes (a launch of larger ones is refused) and ``min_resident`` is
    how many such cubes a CUDA multiprocessor should hold at once: CUDA compiles the kernel
    for them (``__launch_bounds__``), so each unit's registers fit, where the compiler left to
    itself may take a few more and halve the cubes resident. Other targets check the bound."""

    def make(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, cache_size=cache_size, max_units=max_units, min_resident=min_resident)

    return make if fn is None else make(fn)


#: What each option of ``@K.kernel`` is, as its error says.
_OPTIONS = {
    "cache_size": "the number of specializations kept",
    "max_units": "the most units a cube of the kernel has",
    "min_resident": "cubes of max_units a CUDA multiprocessor should hold at once",
}


def func(fn: Callable[..., Any]) -> DeviceFunction:
    """Decorate a device function (``@K.func``): kernels and other device functions call it; it is
    inlined at each call and typed from the call's arguments (generic over ``K.F``/``K.I``)."""
    return DeviceFunction(fn)

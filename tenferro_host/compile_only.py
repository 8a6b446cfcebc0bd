"""Compile a DSL kernel (or raw source) for a GPU target without a GPU: ``from
tenferro_host.compile_only import compile_only``.

Operation authors (and the conformance suite) use it on machines with no device to prove that
a kernel specializes and compiles for every target it claims. The targets are the ones the
backend plugins registered (``cuda``: CUDA C through NVRTC, ``wgsl``: WGSL), found through the
host's registry. ``signature`` gives the runtime arguments: an :class:`ArrayDesc`/
:class:`ScalarDesc` each, or a string — ``"float32[1]"`` is a 1-D float32 array, ``"int32"`` a
scalar, ``"number"`` a plain Python number.

>>> from tenferro_host import kernel as K
>>> @K.kernel
... def double(out: K.Array[K.F], x: K.Array[K.F]):
...     i = K.ABSOLUTE_POS
...     if i < out.len:
...         out[i] = x[i] * 2.0
>>> wgsl = compile_only(double, "wgsl", ["float32[1]", "float32[1]"])
>>> wgsl.target, "@compute" in wgsl.source
('wgsl', True)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._host import Host
from .dtypes import dtype as resolve_dtype
from .errors import ValidationError
from .kernel import ArgDesc, ArrayDesc, Kernel, ScalarDesc
from .provider._compile_targets import CompiledKernel, CompileOptions

if TYPE_CHECKING:
    from .provider._registry import Registry

_ARRAY = re.compile(r"^(\w+)\[(\d+)\]$")
_default: list[Host] = []
_default_lock = threading.Lock()


def registry_of(host: Host | None) -> Registry:
    """The registry of ``host``, or of the process's compile-only host (made on first use)."""
    if host is not None:
        return host.registry
    with _default_lock:
        if not _default:
            _default.append(Host())
        return _default[0].registry


def arg_desc(item: Any) -> ArgDesc:
    """One argument description from an ArrayDesc/ScalarDesc or its string form.

    >>> arg_desc("float32[2]"), arg_desc("number")
    (ArrayDesc(dtype=tenferro_host.float32, ndim=2, compact=True), ScalarDesc(dtype=None))
    """
    if isinstance(item, (ArrayDesc, ScalarDesc)):
        return item
    if isinstance(item, str):
        if item == "number":
            return ScalarDesc()
        m = _ARRAY.match(item)
        if m is not None:
            return ArrayDesc(resolve_dtype(m.group(1)), int(m.group(2)))
        return ScalarDesc(resolve_dtype(item))
    raise ValidationError(
        f"signature entry {item!r}: use 'float32[1]' (a 1-D array), 'int32' (a scalar), "
        "'number', or an ArrayDesc/ScalarDesc",
        argument="signature",
    )


def compile_only(
    kernel: Kernel,
    target: str,
    signature: Sequence[Any],
    constants: Mapping[str, Any] | None = None,
    *,
    arch: str = "sm_90",
    dim: tuple[int, int, int] = (256, 1, 1),
    features: Sequence[str] | None = None,
    host: Host | None = None,
) -> CompiledKernel:
    """Specialize ``kernel`` for ``signature`` and compile it for ``target`` ("cuda" | "wgsl").

    cuda: the generated CUDA C compiled by NVRTC for ``arch`` (``sm_XY`` gives a CUBIN,
    ``compute_XY`` PTX); needs the ``cuda`` extra, not a GPU; ``arch`` says what the device
    has, ``features`` is refused. wgsl: the generated WGSL for a workgroup of ``dim``, every
    array bound separately, for a device with ``features`` (of ``"shader-f16"``,
    ``"subgroup"``): with ``"subgroup"`` subgroup operations are the feature's builtins, without
    it the fallback through workgroup memory; None means ``"shader-f16"`` where an argument is
    f16 and no ``"subgroup"``. Errors are the ones a launch would raise (DTypeError, DslError,
    UnsupportedError, CompileError ...). ``host`` picks whose plugins provide the target.
    """
    if not isinstance(kernel, Kernel):
        raise ValidationError(
            f"compile_only needs a @K.kernel function, got {type(kernel).__name__}",
            argument="kernel",
        )
    if not isinstance(target, str):
        raise ValidationError(f"target must be a string, got {target!r}", argument="target")
    compile = registry_of(host).compile_target(target)
    if isinstance(signature, (str, bytes)) or not isinstance(signature, Sequence):
        raise ValidationError(
            f"signature must be a sequence of argument descriptions, got {signature!r}",
            argument="signature",
        )
    descs = [arg_desc(item) for item in signature]
    if features is not None and (
        isinstance(features, (str, bytes))
        or not isinstance(features, Sequence)
        or not all(isinstance(f, str) for f in features)
    ):
        raise ValidationError(
            f"features must be a sequence of feature names such as ('subgroup',), got {features!r}",
            argument="features",
        )
    wanted = None if features is None else tuple(features)
    options = CompileOptions(arch=arch, dim=dim, features=wanted)
    return compile(kernel, descs, constants or {}, options)


def compile_source(
    source: str | bytes,
    *,
    language: str = "cuda",
    arch: str = "sm_90",
    name: str = "kernel.cu",
    host: Host | None = None,
) -> CompiledKernel:
    """Compile raw ``source`` of ``language`` for ``arch`` with the compiler its backend
    registered (cuda: NVRTC, needs the ``cuda`` extra, not a GPU); CompileError on failure."""
    return registry_of(host).source_compiler(language)(source, arch, name)


def __getattr__(name: str) -> Any:
    if name == "TARGETS":  # the 0.1 table of targets, now whatever the plugins registered
        return registry_of(None).compile_targets()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CompiledKernel", "arg_desc", "compile_only", "compile_source"]

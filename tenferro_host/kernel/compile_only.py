"""Compile a DSL kernel for a GPU target without a GPU: CUDA C through NVRTC, or WGSL.

Operation authors (and the conformance suite) use it on machines with no device to prove that
a kernel specializes and compiles for every target it claims. ``signature`` gives the runtime
arguments: an :class:`ArrayDesc`/:class:`ScalarDesc` each, or a string — ``"float32[1]"`` is a
1-D float32 array, ``"int32"`` a scalar, ``"number"`` a plain Python number.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..dtypes import dtype as resolve_dtype
from ..dtypes import float16
from ..errors import ValidationError
from ._kernel import ArgDesc, ArrayDesc, Kernel, ScalarDesc

#: Targets and the DSL target name their specializations are made for.
TARGETS = {"cuda": "cuda", "wgsl": "webgpu"}
_ARRAY = re.compile(r"^(\w+)\[(\d+)\]$")


@dataclass(frozen=True)
class CompiledKernel:
    """What compiling produced: generated ``source``, and for cuda the NVRTC ``image``."""

    kernel: str
    target: str
    source: str
    image: bytes | None = None
    image_kind: str | None = None  # "cubin" | "ptx" for cuda
    arch: str | None = None


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
) -> CompiledKernel:
    """Specialize ``kernel`` for ``signature`` and compile it for ``target`` ("cuda" | "wgsl").

    cuda: the generated CUDA C compiled by NVRTC for ``arch`` (``sm_XY`` gives a CUBIN,
    ``compute_XY`` PTX); needs the ``cuda`` extra, not a GPU. wgsl: the generated WGSL for a
    workgroup of ``dim``, every array bound separately. Errors are the ones a launch would raise
    (DTypeError, DslError, CompileError ...).
    """
    if not isinstance(kernel, Kernel):
        raise ValidationError(
            f"compile_only needs a @K.kernel function, got {type(kernel).__name__}",
            argument="kernel",
        )
    if target not in TARGETS:
        raise ValidationError(
            f"target {target!r} is not one of {', '.join(TARGETS)}", argument="target"
        )
    if isinstance(signature, (str, bytes)) or not isinstance(signature, Sequence):
        raise ValidationError(
            f"signature must be a sequence of argument descriptions, got {signature!r}",
            argument="signature",
        )
    descs = [arg_desc(item) for item in signature]
    if target == "cuda":
        return _cuda(kernel, descs, constants or {}, arch)
    return _wgsl(kernel, descs, constants or {}, dim)


def _cuda(
    kernel: Kernel, descs: list[ArgDesc], constants: Mapping[str, Any], arch: str
) -> CompiledKernel:
    from tenferro_host_cuda.nvrtc import NvrtcOptions, compile_source
    from tenferro_host_cuda_jit.codegen import generate

    features = (arch.replace("compute_", "sm_"),)
    spec = kernel.specialize(descs, constants, TARGETS["cuda"], features)
    generated = generate(spec)
    image = compile_source(generated.source, NvrtcOptions(arch=arch), name=f"{kernel.name}.cu")
    return CompiledKernel(kernel.name, "cuda", generated.source, image.data, image.kind, arch)


def _wgsl(
    kernel: Kernel, descs: list[ArgDesc], constants: Mapping[str, Any], dim: tuple[int, int, int]
) -> CompiledKernel:
    from tenferro_host_webgpu.wgsl import generate

    f16 = any(getattr(d, "dtype", None) is float16 for d in descs)
    spec = kernel.specialize(descs, constants, TARGETS["wgsl"], ("shader-f16",) if f16 else ())
    groups = range(sum(isinstance(d, ArrayDesc) for d in descs))
    program = generate(spec, dim, list(groups), folded=False)
    return CompiledKernel(kernel.name, "wgsl", program.source)


__all__ = ["TARGETS", "CompiledKernel", "arg_desc", "compile_only"]

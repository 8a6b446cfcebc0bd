"""The ``wgsl`` compile-only target: DSL kernel -> WGSL, without an adapter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tenferro_host import float16
from tenferro_host.kernel import ArgDesc, ArrayDesc, Kernel
from tenferro_host.provider import CompiledKernel, CompileOptions


def compile_wgsl(
    kernel: Kernel, descs: Sequence[ArgDesc], constants: Mapping[str, Any], options: CompileOptions
) -> CompiledKernel:
    """The WGSL of ``kernel`` for a workgroup of ``options.dim``, every array bound separately."""
    from .wgsl import generate  # registering the target must not load the code generator

    f16 = any(getattr(d, "dtype", None) is float16 for d in descs)
    spec = kernel.specialize(descs, constants, "webgpu", ("shader-f16",) if f16 else ())
    groups = range(sum(isinstance(d, ArrayDesc) for d in descs))
    program = generate(spec, options.dim, list(groups), folded=False)
    return CompiledKernel(kernel.name, "wgsl", program.source)

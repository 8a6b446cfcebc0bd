"""The ``cuda`` compile-only target: DSL kernel -> CUDA C -> NVRTC image, without a GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tenferro_host import ValidationError
from tenferro_host.cuda import raw
from tenferro_host.kernel import ArgDesc, Kernel
from tenferro_host.provider import CompiledKernel, CompileOptions


def compile_cuda(
    kernel: Kernel, descs: Sequence[ArgDesc], constants: Mapping[str, Any], options: CompileOptions
) -> CompiledKernel:
    """Specialize ``kernel`` for the CUDA target of ``options.arch`` and compile it by NVRTC."""
    from ._codegen import generate  # registering the target must not load the code generator

    if options.features is not None:
        raise ValidationError(
            f"the cuda target takes no features (got {options.features!r}): what the device "
            "offers follows from arch (e.g. arch='sm_70' for tensor cores)",
            argument="features",
        )

    features = (options.arch.replace("compute_", "sm_"),)
    spec = kernel.specialize(descs, constants, "cuda", features)
    generated = generate(spec)
    image = raw.nvrtc_compile(generated.source, raw.NvrtcOptions(arch=options.arch))
    return CompiledKernel(
        kernel.name, "cuda", generated.source, image.data, image.kind, options.arch
    )

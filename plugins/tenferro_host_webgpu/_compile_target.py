"""The ``wgsl`` compile-only target: DSL kernel -> WGSL, without an adapter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tenferro_host import ValidationError, float16
from tenferro_host.kernel import ArgDesc, ArrayDesc, Kernel
from tenferro_host.provider import CompiledKernel, CompileOptions

FEATURES = ("shader-f16", "subgroup")
"""The device features that change the WGSL of a kernel (wgpu-native's names)."""


def target_features(descs: Sequence[ArgDesc], options: CompileOptions) -> tuple[str, ...]:
    """The features of the device compiled for: the caller's (checked against
    :data:`FEATURES`), or by default ``shader-f16`` where an argument is f16 and no subgroups."""
    if options.features is None:
        f16 = any(getattr(d, "dtype", None) is float16 for d in descs)
        return ("shader-f16",) if f16 else ()
    unknown = [f for f in options.features if f not in FEATURES]
    if unknown:
        raise ValidationError(
            f"the wgsl target knows no feature {unknown[0]!r}; name the device's among "
            f"{', '.join(map(repr, FEATURES))}",
            argument="features",
        )
    return tuple(f for f in FEATURES if f in options.features)


def compile_wgsl(
    kernel: Kernel, descs: Sequence[ArgDesc], constants: Mapping[str, Any], options: CompileOptions
) -> CompiledKernel:
    """The WGSL of ``kernel`` for a workgroup of ``options.dim`` on a device with the target's
    features (:func:`target_features`), every array bound separately."""
    from . import _wgsl  # registering the target must not load the code generator

    features = target_features(descs, options)
    spec = kernel.specialize(descs, constants, "webgpu", features)
    shader_f16 = options.features is None or "shader-f16" in features  # the default allows f16
    _wgsl.check_portable(spec.ir, shader_f16, "webgpu")
    groups = range(sum(isinstance(d, ArrayDesc) for d in descs))
    program = _wgsl.generate(spec, options.dim, list(groups), folded=False)
    return CompiledKernel(kernel.name, "wgsl", program.source)

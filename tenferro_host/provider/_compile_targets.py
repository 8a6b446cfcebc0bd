"""Compile-only targets: how a backend compiles a DSL kernel or raw source without a device.

A backend registers them on its :class:`~._registry.RegistrationView` (``add_compile_target``,
``add_source_compiler``); :func:`tenferro_host.compile_only.compile_only`, the testing kit
and the benchmarks find them through the host's registry, so the host never imports a backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..kernel._kernel import ArgDesc, Kernel


@dataclass(frozen=True)
class CompileOptions:
    """What a compile-only target may use: the CUDA ``arch`` (``sm_XY`` gives a CUBIN,
    ``compute_XY`` PTX), the WGSL workgroup size ``dim`` and the optional ``features`` of the
    device compiled for (WGSL: ``shader-f16``, ``subgroup``; None: the target's default); each
    target reads its own and refuses what it cannot use."""

    arch: str = "sm_90"
    dim: tuple[int, int, int] = (256, 1, 1)
    features: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CompiledKernel:
    """What compiling produced: generated ``source``, and for cuda the NVRTC ``image``."""

    kernel: str
    target: str
    source: str
    image: bytes | None = None
    image_kind: str | None = None  # "cubin" | "ptx" for cuda
    arch: str | None = None


#: A DSL target: ``compile(kernel, descs, constants, options)`` specializes ``kernel`` for the
#: argument descriptions and compiles it; errors are those a launch would raise.
CompileFn = Callable[
    ["Kernel", Sequence["ArgDesc"], Mapping[str, Any], CompileOptions], CompiledKernel
]
#: A raw source compiler: ``compile(source, arch, name)``; CompileError with the log on failure.
SourceCompileFn = Callable[[str | bytes, str, str], CompiledKernel]

__all__ = ["CompileFn", "CompileOptions", "CompiledKernel", "SourceCompileFn"]

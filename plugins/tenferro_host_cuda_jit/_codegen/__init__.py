"""The CUDA backend's DSL compiler, private to this plugin: a specialization -> one CUDA C
kernel and its ABI (:mod:`._cuda_c`), with matrix fragments (:mod:`._matrix`), subgroup
operations (:mod:`._subgroup`) and the numeric helpers (:mod:`._numerics`) in their own
modules."""

from __future__ import annotations

from ._cuda_c import (
    GRID_1D,
    GRID_DIRECT,
    GRID_FOLDED,
    MAX_STATIC_SHARED_BYTES,
    AbiParam,
    CudaKernelSource,
    generate,
    grid_shape,
    kernel_abi,
    kernel_symbol,
)

__all__ = [
    "GRID_1D",
    "GRID_DIRECT",
    "GRID_FOLDED",
    "MAX_STATIC_SHARED_BYTES",
    "AbiParam",
    "CudaKernelSource",
    "generate",
    "grid_shape",
    "kernel_abi",
    "kernel_symbol",
]

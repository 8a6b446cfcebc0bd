"""The WebGPU backend's DSL compiler, private to this plugin: a specialization -> one WGSL
module (:mod:`._shader`), with the value types and portability rule (:mod:`._types`), numeric
helpers (:mod:`._numerics`), subgroup operations (:mod:`._subgroup`), matrix fragments
(:mod:`._matrix`) and the loop canary (:mod:`._canary`) in their own modules."""

from __future__ import annotations

from ._canary import uses_loops
from ._shader import WgslProgram, generate
from ._subgroup import FALLBACK_SIZE, FEATURE, fallback_unit_bytes
from ._types import check_portable, workgroup_bytes

__all__ = [
    "FALLBACK_SIZE",
    "FEATURE",
    "WgslProgram",
    "check_portable",
    "fallback_unit_bytes",
    "generate",
    "uses_loops",
    "workgroup_bytes",
]

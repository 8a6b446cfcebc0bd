"""What a WebGPU runtime knows about its device: identity, limits, and the portability rule.

The portability rule (docs/contract.md) decides which dtypes a WebGPU runtime stores: f64 and
i64 are never requested from the adapter, bool is stored as u32, f16 needs ``shader-f16``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenferro_host import DType, UnsupportedError

from .adapters import AdapterInfo

#: dtype name -> the feature that would be needed and why it is not offered.
_NEVER_REQUESTED = {
    "float64": "shader-f64",
    "int64": "shader-int64",
    "complex64": "complex",
    "complex128": "complex",
}


@dataclass(frozen=True)
class WebGpuDeviceId:
    """The adapter a runtime runs on (value semantics; two runtimes may share it)."""

    index: int
    name: str
    api: str

    def __str__(self) -> str:
        return f"webgpu:{self.index} ({self.name}, {self.api})"


@dataclass(frozen=True)
class WebGpuDeviceInfo:
    """Adapter properties and the limits the device was requested with."""

    name: str
    vendor: str
    adapter_type: str
    api: str
    software: bool
    shader_f16: bool
    max_buffer_size: int
    max_storage_buffer_binding_size: int
    max_storage_buffers_per_shader_stage: int
    max_uniform_buffer_binding_size: int
    max_compute_workgroups_per_dimension: int
    max_compute_invocations_per_workgroup: int
    max_compute_workgroup_size: tuple[int, int, int]
    max_compute_workgroup_storage_size: int = 16384  # WebGPU's default: what any adapter grants
    subgroups: bool = False  # the device was created with the "subgroup" feature

    @classmethod
    def from_device(
        cls, adapter: AdapterInfo, limits: dict[str, Any], f16: bool, subgroups: bool = False
    ) -> WebGpuDeviceInfo:
        """The info of a device requested from ``adapter`` with ``limits`` (and shader-f16,
        subgroup)."""
        return cls(
            name=adapter.name,
            vendor=adapter.vendor,
            adapter_type=adapter.adapter_type,
            api=adapter.backend,
            software=adapter.software,
            shader_f16=f16,
            max_buffer_size=int(limits["max-buffer-size"]),
            max_storage_buffer_binding_size=int(limits["max-storage-buffer-binding-size"]),
            max_storage_buffers_per_shader_stage=int(
                limits["max-storage-buffers-per-shader-stage"]
            ),
            max_uniform_buffer_binding_size=int(limits["max-uniform-buffer-binding-size"]),
            max_compute_workgroups_per_dimension=int(
                limits["max-compute-workgroups-per-dimension"]
            ),
            max_compute_invocations_per_workgroup=int(
                limits["max-compute-invocations-per-workgroup"]
            ),
            max_compute_workgroup_size=(
                int(limits["max-compute-workgroup-size-x"]),
                int(limits["max-compute-workgroup-size-y"]),
                int(limits["max-compute-workgroup-size-z"]),
            ),
            max_compute_workgroup_storage_size=int(limits["max-compute-workgroup-storage-size"]),
            subgroups=subgroups,
        )


def stored_dtypes(shader_f16: bool) -> frozenset[str]:
    """The dtypes a WebGPU runtime stores under the portability rule."""
    base = {"float32", "int32", "uint32", "bool"}
    return frozenset(base | {"float16"}) if shader_f16 else frozenset(base)


def unsupported_dtype(dt: DType, backend: str) -> UnsupportedError:
    """The typed refusal of a dtype outside the portability rule, naming the feature."""
    if dt.name == "float16":
        return UnsupportedError(
            f"backend {backend!r} cannot store float16: the adapter does not offer the "
            "'shader-f16' feature; use float32 or another adapter (TENFERRO_WEBGPU_ADAPTER)",
            backend=backend,
            feature="shader-f16",
        )
    feature = _NEVER_REQUESTED.get(dt.name, dt.name)
    return UnsupportedError(
        f"backend {backend!r} does not store {dt.name}: the WebGPU portability rule never "
        f"requests {feature!r}; use a 32-bit type, or run on cuda or cpu",
        backend=backend,
        feature=feature,
    )


def device_element_size(dt: DType) -> int:
    """Bytes per element in a storage buffer (bool is stored as u32)."""
    return 4 if dt.name == "bool" else dt.itemsize


__all__ = [
    "WebGpuDeviceId",
    "WebGpuDeviceInfo",
    "device_element_size",
    "stored_dtypes",
    "unsupported_dtype",
]

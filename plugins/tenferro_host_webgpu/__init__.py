"""The WebGPU provider plugin (wgpu-py): a runtime per adapter and the DSL compiled to WGSL.

WebGPU promises the DSL only: ``ex.jit(op)`` launches ``@K.kernel`` objects; there is no raw WGSL
surface, no native module, stream or pointer API (``ex.raw`` raises UnsupportedError).
Registered by entry point ``webgpu`` like any third-party plugin. Importing this package does
not import wgpu: ``probe()`` and runtime creation do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenferro_host import ExtensionCapability, TenferroError
from tenferro_host.provider import BackendProvider, BackendStatus, RegistrationView, hookimpl

from ._compile_target import compile_wgsl
from ._exec_session import WebGpuExecSession
from ._runtime import WebGpuRuntime
from ._storage import WebGpuStorage
from .adapters import ADAPTER_ENV, AdapterInfo, adapter, adapters
from .device import WebGpuDeviceId, WebGpuDeviceInfo

if TYPE_CHECKING:
    from tenferro_host.provider import HostServices, Runtime

TENFERRO_HOST_API = (1, 0)
TENFERRO_HOST_SPI = (1, 0)  # the provider SPI it builds on (tenferro_host.provider.SPI_VERSION)

#: Default-backend preference: below CUDA (20), above CPU (0); software adapters never default.
PRIORITY = 10


def probe() -> BackendStatus:
    """Whether WebGPU runs here, and on which adapters (best first)."""
    try:
        found = adapters()
    except TenferroError as exc:
        return BackendStatus("webgpu", False, exc.message, error=exc)
    except Exception as exc:  # a broken driver stack must not break discovery
        return BackendStatus("webgpu", False, f"wgpu adapter discovery failed: {exc}")
    if not found:
        return BackendStatus(
            "webgpu",
            False,
            "wgpu found no adapter; install a driver (for a software adapter on Debian: "
            "apt-get install mesa-vulkan-drivers)",
        )
    return BackendStatus(
        "webgpu",
        True,
        software=found[0].software,
        devices=[a.describe() for a in found],
    )


def _create(host: HostServices, index: int) -> Runtime:
    return WebGpuRuntime(host, index)


def _jit_session(ex: Any, op: str) -> Any:
    global _JIT_SESSION
    if _JIT_SESSION is None:  # imported on first use (the import statement costs each call)
        from ._jit import WebGpuJitSession

        _JIT_SESSION = WebGpuJitSession
    return _JIT_SESSION(ex, op)


_JIT_SESSION: Any = None


@hookimpl
def tenferro_host_register(registry: RegistrationView) -> None:
    registry.add_backend(BackendProvider("webgpu", probe, _create, priority=PRIORITY))
    registry.add_jit("webgpu", _jit_session)
    registry.add_compile_target("wgsl", compile_wgsl)


@hookimpl
def tenferro_host_capabilities(backend: Runtime) -> dict[ExtensionCapability, bool] | None:
    if backend.kind != "webgpu":
        return None
    return {
        ExtensionCapability.JIT_KERNEL: True,
        ExtensionCapability.NATIVE_MODULE: False,
        ExtensionCapability.RUNTIME_COMPILATION: False,
        ExtensionCapability.RAW_STREAM: False,
        ExtensionCapability.SAME_DEVICE_ASYNC_COPY: False,
        ExtensionCapability.PEER_COPY: False,
    }


__all__ = [
    "ADAPTER_ENV",
    "PRIORITY",
    "TENFERRO_HOST_API",
    "TENFERRO_HOST_SPI",
    "AdapterInfo",
    "WebGpuDeviceId",
    "WebGpuDeviceInfo",
    "WebGpuExecSession",
    "WebGpuRuntime",
    "WebGpuStorage",
    "adapter",
    "adapters",
    "probe",
]

"""CUDA provider plugin: the ``cuda`` backend and the raw extension seam (cuda-python).

Registered by the entry point ``cuda = "tenferro_host_cuda"`` like any third-party plugin and
importing only tenferro_host's public API and provider SPI. Importing it loads no GPU library:
``cuda.bindings`` is imported on first use, and ``probe()`` reports a missing driver or
library as an unavailable backend with the reason.

>>> import tenferro_host as tf
>>> status = tf.Host().backend_status("cuda")
>>> status.available or bool(status.reason)
True
"""

from __future__ import annotations

from tenferro_host import BackendProvider, ExtensionCapability, hookimpl
from tenferro_host.provider import HostServices, RegistrationView, Runtime

from . import raw
from ._copies import copy_from_peer, copy_from_same_device
from ._device import CudaDeviceInfo, nvrtc_version, probe
from ._exec_session import CudaExecSession
from ._graph_form import registered_form
from ._nvrtc import compile_only
from ._p2p_probe import PeerProbe, probe_p2p
from ._peer import can_access_peer, has_accessible_peer
from ._runtime import CudaRuntime

TENFERRO_HOST_API = (1, 0)
TENFERRO_HOST_SPI = (1, 0)  # the provider SPI it builds on (tenferro_host.provider.SPI_VERSION)


def _create(host: HostServices, index: int) -> CudaRuntime:
    return CudaRuntime(index, host=host)


@hookimpl
def tenferro_host_register(registry: RegistrationView) -> None:
    """Provide the ``cuda`` backend (preferred over the others when a device is present) and
    its raw source compiler (NVRTC, no device needed)."""
    registry.add_backend(
        BackendProvider("cuda", probe, _create, priority=100, capture=registered_form())
    )
    registry.add_source_compiler("cuda", compile_only)


@hookimpl
def tenferro_host_capabilities(backend: Runtime) -> dict[ExtensionCapability, bool] | None:
    """The extension capabilities of a ``cuda`` runtime; None for other backends."""
    if backend.kind != "cuda":
        return None
    return {
        ExtensionCapability.NATIVE_MODULE: True,
        ExtensionCapability.RUNTIME_COMPILATION: nvrtc_version() is not None,
        ExtensionCapability.RAW_STREAM: True,
        ExtensionCapability.SAME_DEVICE_ASYNC_COPY: True,
        ExtensionCapability.PEER_COPY: has_accessible_peer(backend.index),
    }


__all__ = [
    "TENFERRO_HOST_API",
    "TENFERRO_HOST_SPI",
    "CudaDeviceInfo",
    "CudaExecSession",
    "CudaRuntime",
    "PeerProbe",
    "can_access_peer",
    "copy_from_peer",
    "copy_from_same_device",
    "probe_p2p",
    "raw",
    "tenferro_host_capabilities",
    "tenferro_host_register",
]

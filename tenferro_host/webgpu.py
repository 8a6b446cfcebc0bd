"""WebGPU facade (PEP 562): names resolve lazily from the WebGPU provider plugin.

Importing this module loads no GPU library. WebGPU offers the DSL only (``ex.jit``): no raw
WGSL surface and no CUDA-like module or pointer API.
"""

from __future__ import annotations

from .facade import lazy_names
from .provider._exec_session import exec_session_for

_LAZY = {
    "WebGpuRuntime": "tenferro_host_webgpu",
    "WebGpuExecSession": "tenferro_host_webgpu",
    "WebGpuDeviceInfo": "tenferro_host_webgpu",
    "adapters": "tenferro_host_webgpu",
    "adapter": "tenferro_host_webgpu",
}


#: The WebGPU exec session of a backend session, or None if it is not a WebGPU session.
exec_session = exec_session_for("webgpu")
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = ["exec_session", *_LAZY]

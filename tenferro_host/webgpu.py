"""WebGPU facade (PEP 562): names resolve lazily from the WebGPU provider plugin.

Importing this module loads no GPU library. WebGPU offers the DSL only (``ex.jit``): no raw
WGSL surface and no CUDA-like module or pointer API.
"""

from __future__ import annotations

import importlib
from typing import Any

from .provider.session import ExecSession, exec_session_of

_LAZY = {
    "WebGpuRuntime": "tenferro_host_webgpu",
    "WebGpuExecSession": "tenferro_host_webgpu",
    "WebGpuDeviceInfo": "tenferro_host_webgpu",
    "adapters": "tenferro_host_webgpu",
}


def exec_session(session: Any) -> ExecSession | None:
    """The WebGPU exec session of a backend session, or None if it is not a WebGPU session."""
    return exec_session_of(session, "webgpu")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tenferro_host.webgpu' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["exec_session", *_LAZY]

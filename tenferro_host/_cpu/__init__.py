"""The CPU backend, a provider plugin like the others: the host's loader registers this module
through the same ``tenferro_host_register`` hook path as an entry point's, before the entry points.

It is not an entry point because it ships inside the host and must be there whatever the installed
metadata says (a source tree on ``sys.path``, a wheel without entry points) and whatever
``TENFERRO_DISABLE_PLUGINS`` names: ``host.backend("cpu")`` always works. Its DSL session runs
kernels on the vectorised CPU interpreter.
"""

from __future__ import annotations

import os
import platform

from .. import ExtensionCapability
from ..provider import BackendProvider, BackendStatus, RegistrationView, Runtime, hookimpl
from ._jit import CpuJitSession
from ._runtime import CpuDeviceInfo, CpuRuntime, CpuStorage


def _probe() -> BackendStatus:
    info = CpuDeviceInfo(platform.processor() or platform.machine(), os.cpu_count() or 1)
    return BackendStatus(
        "cpu", True, devices=[{"index": 0, "name": info.name, "cores": info.cores}]
    )


@hookimpl
def tenferro_host_register(registry: RegistrationView) -> None:
    """Provide the ``cpu`` backend and its DSL session (the interpreter)."""
    registry.add_backend(BackendProvider("cpu", _probe, CpuRuntime, priority=0))
    registry.add_jit("cpu", CpuJitSession)


@hookimpl
def tenferro_host_capabilities(backend: Runtime) -> dict[ExtensionCapability, bool] | None:
    """The CPU runtime runs DSL kernels; nothing else is an extension there."""
    if backend.kind != "cpu":
        return None
    return {ExtensionCapability.JIT_KERNEL: True}


__all__ = [
    "CpuDeviceInfo",
    "CpuRuntime",
    "CpuStorage",
    "tenferro_host_capabilities",
    "tenferro_host_register",
]

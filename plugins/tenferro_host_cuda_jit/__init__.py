"""The CUDA DSL provider: ``ex.jit(op)`` on CUDA, built only on the public raw seam.

Registered by the entry point ``cuda_jit`` like any third-party plugin: it adds the JIT factory
for backend kind ``cuda``. DSL kernels become CUDA C (:mod:`._codegen`), are compiled with NVRTC
for the live device and launched through one raw session per JIT session (:mod:`.session`).
It imports only tenferro_host's public API and SPI and ``tenferro_host.cuda.raw``; importing it
loads no GPU library (the session module is imported when a CUDA JIT session is made).

>>> import tenferro_host as tf
>>> tf.Host().registry.jit_factory("cuda") is not None
True
"""

from __future__ import annotations

from typing import Any

from tenferro_host.provider import RegistrationView, hookimpl

from ._compile_target import compile_cuda

TENFERRO_HOST_API = (1, 0)
TENFERRO_HOST_SPI = (1, 0)  # the provider SPI it builds on (tenferro_host.provider.SPI_VERSION)


def jit_session(ex: Any, op: str) -> Any:
    """The JIT factory for ``cuda`` exec sessions (the session module loads on first use)."""
    global _SESSION_TYPE
    if _SESSION_TYPE is None:
        from ._jit import CudaJitSession

        _SESSION_TYPE = CudaJitSession
    return _SESSION_TYPE(ex, op)


_SESSION_TYPE: Any = None


@hookimpl
def tenferro_host_register(registry: RegistrationView) -> None:
    """Provide the DSL (JIT) session of the ``cuda`` backend and its compile-only target."""
    registry.add_jit("cuda", jit_session)
    registry.add_compile_target("cuda", compile_cuda)


__all__ = ["TENFERRO_HOST_API", "TENFERRO_HOST_SPI", "jit_session", "tenferro_host_register"]

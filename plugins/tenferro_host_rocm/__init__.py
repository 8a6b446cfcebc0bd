"""ROCm provider: the ``rocm`` backend, reported as a typed "unsupported".

ROCm support ships only with hardware evidence (docs/contract.md). Until a HIP substrate is
validated on real hardware this provider makes the backend *visible* — ``caps`` lists it, with
the reason — and every attempt to use it raises :class:`tenferro_host.UnsupportedError`. It
never claims a capability. It imports only tenferro_host's public API, like any plugin.

>>> import tenferro_host as tf
>>> status = tf.Host().backend_status("rocm")
>>> status.available, status.reason == REASON
(False, True)
"""

from __future__ import annotations

from typing import NoReturn

from tenferro_host import (
    BackendProvider,
    BackendStatus,
    ExtensionCapability,
    UnsupportedError,
    hookimpl,
)
from tenferro_host.provider import HostServices, RegistrationView, Runtime

TENFERRO_HOST_API = (1, 0)
TENFERRO_HOST_SPI = (1, 0)  # the provider SPI it builds on (tenferro_host.provider.SPI_VERSION)

#: Why the backend is unavailable; ``caps`` shows it and every UnsupportedError carries it.
REASON = "no validated HIP substrate; ROCm support ships only with hardware evidence"


def unsupported() -> UnsupportedError:
    """The error every use of the ``rocm`` backend raises."""
    return UnsupportedError(
        f"backend 'rocm' is unsupported: {REASON}; use 'cpu', 'cuda' or 'webgpu' instead",
        backend="rocm",
        feature="backend",
        reason=REASON,
    )


def _probe() -> BackendStatus:
    return BackendStatus("rocm", False, reason=REASON, error=unsupported())


def _create(host: HostServices, index: int) -> NoReturn:
    raise unsupported()


@hookimpl
def tenferro_host_register(registry: RegistrationView) -> None:
    registry.add_backend(BackendProvider("rocm", _probe, _create, priority=-1))


@hookimpl
def tenferro_host_capabilities(backend: Runtime) -> dict[ExtensionCapability, bool] | None:
    if backend.kind != "rocm":
        return None
    return dict.fromkeys(ExtensionCapability, False)


__all__ = ["REASON", "TENFERRO_HOST_API", "TENFERRO_HOST_SPI", "unsupported"]

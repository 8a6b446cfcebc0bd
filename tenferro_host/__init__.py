"""tenferro-host: a plugin host for GPU operation packages.

The host owns tensors, devices, streams, memory and sessions; pip-installed operation packages
launch their own kernels on host-owned tensors inside scoped sessions. Importing this package
loads no GPU library.

>>> import numpy as np, tenferro_host as tf
>>> host = tf.Host()
>>> cpu = host.backend("cpu")
>>> t = cpu.upload(np.ones((2, 2), dtype=np.float32))
>>> t.shape, t.dtype
((2, 2), tenferro_host.float32)
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from . import cpu, cuda, webgpu
from ._host import Host
from .capability import ExtensionCapability
from .dtypes import (
    DType,
    bool_,
    complex64,
    complex128,
    dtype,
    float16,
    float32,
    float64,
    int32,
    int64,
    uint32,
)
from .errors import *  # noqa: F403 - the error hierarchy is part of the top-level API
from .errors import HostActorDiedError
from .errors import __all__ as _errors_all
from .identity import AllocationDomainId, CudaDeviceId, CudaDeviceUuid, RuntimeIdentity
from .ops import KernelSource, OpSpec, Requirement, Signature
from .provider._hookspecs import hookimpl
from .provider._registry import BackendProvider, BackendStatus
from .provider._runtime import Runtime
from .tensor import Placement, Tensor

__version__ = "0.1.0"

#: The name 0.1 exported for :class:`Runtime` (what ``host.backend(name)`` returns), kept as an
#: alias.
Backend = Runtime


def __getattr__(name: str) -> Any:
    if name == "kernel":
        return importlib.import_module(".kernel", __name__)
    if name == "ActorUnavailableError":
        # 0.1's name of HostActorDiedError, which read like Ray's transient error of that name.
        warnings.warn(
            "tenferro_host.ActorUnavailableError is now HostActorDiedError (a timed-out call "
            "is a CallTimeoutError)",
            DeprecationWarning,
            stacklevel=2,
        )
        return HostActorDiedError
    raise AttributeError(f"module 'tenferro_host' has no attribute {name!r}")


__all__ = [
    "AllocationDomainId",
    "Backend",
    "BackendProvider",
    "BackendStatus",
    "CudaDeviceId",
    "CudaDeviceUuid",
    "DType",
    "ExtensionCapability",
    "Host",
    "KernelSource",
    "OpSpec",
    "Requirement",
    "Placement",
    "Runtime",
    "RuntimeIdentity",
    "Signature",
    "Tensor",
    "bool_",
    "complex64",
    "complex128",
    "cpu",
    "cuda",
    "dtype",
    "float16",
    "float32",
    "float64",
    "hookimpl",
    "int32",
    "int64",
    "uint32",
    "webgpu",
    *_errors_all,
]

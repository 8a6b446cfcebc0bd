"""Extension capabilities: what a backend plausibly offers to operation authors.

Separate from per-op support. ``supports()`` answers "plausibly available", never a promise;
limits live in each backend's device info.
"""

from __future__ import annotations

import enum


class ExtensionCapability(enum.Enum):
    """One kind of extension entry a backend's exec session may offer."""

    JIT_KERNEL = "jit_kernel"
    NATIVE_MODULE = "native_module"
    RUNTIME_COMPILATION = "runtime_compilation"
    RAW_STREAM = "raw_stream"
    SAME_DEVICE_ASYNC_COPY = "same_device_async_copy"
    PEER_COPY = "peer_copy"


__all__ = ["ExtensionCapability"]

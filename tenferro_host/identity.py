"""The four identity layers of the contract (docs/contract.md); never interchangeable.

Each type compares equal only to its own kind, so a UUID can never stand in for a domain.

>>> CudaDeviceId(0) == CudaDeviceId(0)
True
>>> RuntimeIdentity.new() == RuntimeIdentity.new()
False
>>> CudaDeviceId(0) == AllocationDomainId(0)
False
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .errors import ValidationError

_tokens = itertools.count(1)


@dataclass(frozen=True)
class CudaDeviceId:
    """Process-visible device ordinal; changes with CUDA_VISIBLE_DEVICES."""

    ordinal: int

    def __str__(self) -> str:
        return f"cuda:{self.ordinal}"


@dataclass(frozen=True)
class CudaDeviceUuid:
    """The driver's 16-byte physical identity: stable, for diagnostics and same-device tests."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != 16:
            raise ValidationError(
                f"a CUDA device UUID has 16 bytes, got {len(self.raw)}; pass the driver's UUID",
                argument="raw",
            )

    def __str__(self) -> str:
        h = self.raw.hex()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True)
class RuntimeIdentity:
    """One per runtime object: two runtimes on one device differ."""

    token: int

    @classmethod
    def new(cls) -> RuntimeIdentity:
        """A fresh identity, unique in this process."""
        return cls(next(_tokens))


@dataclass(frozen=True)
class AllocationDomainId:
    """The allocator (one memory pool per runtime) that owns a buffer."""

    token: int

    @classmethod
    def new(cls) -> AllocationDomainId:
        """A fresh identity, unique in this process."""
        return cls(next(_tokens))


__all__ = ["AllocationDomainId", "CudaDeviceId", "CudaDeviceUuid", "RuntimeIdentity"]

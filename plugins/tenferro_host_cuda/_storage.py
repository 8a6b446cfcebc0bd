"""CUDA device memory as tensor storage: pool blocks a runtime owns, or imported buffers.

The lowest layer of the plugin above the driver: the runtime allocates :class:`CudaStorage`,
DLPack imports wrap foreign buffers in it, the raw seam borrows it. A collected storage only
queues its release on its runtime (any thread; :class:`~tenferro_host.provider.DeviceStorage`);
the runtime frees it stream-ordered at its next drain point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tenferro_host import ValidationError
from tenferro_host.provider import DeviceStorage, Release

if TYPE_CHECKING:
    from tenferro_host import DType

    from ._runtime import CudaRuntime


class CudaStorage(DeviceStorage):
    """Device memory at ``ptr``: pool memory ("owned", freed stream-ordered when collected) or
    another library's buffer ("imported", its DLPack deleter runs after the stream passes).

    ``block`` is its size class in the runtime's free list (0: none). When collected it queues
    its ``release`` — ``("block", (ptr, class))``, ``("memory", ptr)`` or ``("dlpack",
    managed)`` — on its runtime (provider/_deferred.py).
    """

    __slots__ = ("block", "ptr")

    def __init__(
        self,
        runtime: CudaRuntime,
        ptr: int,
        nbytes: int,
        kind: str = "owned",
        block: int = 0,
        read_only: bool = False,
        release: Release | None = None,
    ) -> None:
        if release is None and kind == "owned" and ptr:
            release = ("block", (ptr, block)) if block else ("memory", ptr)
        self.runtime = runtime
        self.domain = runtime.domain
        self.nbytes = nbytes
        self.kind = kind
        self.read_only = read_only
        self.release = release
        self.ptr = ptr
        self.block = block


class BorrowedStorage(CudaStorage):
    """A framework's buffer lent for a bridge call ("imported", no DLPack capsule).

    Nothing is queued when it dies: the bridge ordered the framework's stream after the
    runtime's work before the framework sees the buffer again, so its memory goes back to the
    framework's allocator as any of the framework's own tensors does. Under the framework's CUDA
    graph capture that matters: a buffer the runtime held until a later drain point would be
    a live allocation of the graph's pool the framework cannot account for. ``owner`` (the
    framework's array, or None where the framework keeps the buffer for the call) lives as long
    as the storage.
    """

    __slots__ = ("owner",)

    def __init__(
        self,
        runtime: CudaRuntime,
        ptr: int,
        dt: DType,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        owner: Any,
        read_only: bool,
    ) -> None:
        n = 1
        reach = 0
        for dim, stride in zip(shape, strides, strict=True):
            n *= dim
            reach += (dim - 1) * stride
        self.runtime = runtime
        self.domain = runtime.domain
        self.nbytes = (reach + 1) * dt.itemsize if n else 0
        self.kind = "imported"
        self.read_only = read_only
        self.release = None
        self.ptr = ptr if n else 0
        self.block = 0
        self.owner = owner


def check_positive_bytes(nbytes: Any, argument: str, op: str | None) -> int:
    """``nbytes`` as an int, or ValidationError naming ``argument`` (negative, bool, not an int)."""
    if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool) or nbytes < 0:
        raise ValidationError(
            f"{argument} must be a non-negative int, got {nbytes!r}", argument=argument, op=op
        )
    return int(nbytes)


__all__ = ["BorrowedStorage", "CudaStorage", "check_positive_bytes"]

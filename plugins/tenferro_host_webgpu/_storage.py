"""The WebGPU storage: one storage buffer, and how it goes back to its runtime when collected
(kept in the free list by size class, or dropped)."""

from __future__ import annotations

from typing import Any

from tenferro_host import DType
from tenferro_host.provider import DeviceStorage, Runtime


class WebGpuStorage(DeviceStorage):
    """A storage buffer of ``nbytes`` host bytes of ``dt``; on the device each element takes
    ``element_size`` bytes (``widen`` times its host size: 4 for bool,
    :func:`.device.device_element_size`) and the buffer is padded to a multiple of 4 bytes.

    ``block`` is its size class in the runtime's free list (0: too large to keep); ``epoch`` the
    queue's submission count after which every earlier use of a reused buffer was submitted (0
    for a new buffer). When collected it queues ``("keep", (class, buffer))`` on its runtime,
    or ``("drop", buffer)`` when it is too large to keep.
    """

    __slots__ = ("block", "buffer", "element_size", "epoch", "widen")

    def __init__(
        self,
        runtime: Runtime,
        buffer: Any,
        nbytes: int,
        dt: DType,
        element_size: int,
        block: int = 0,
        epoch: int = 0,
    ) -> None:
        super().__init__(runtime, nbytes, ("keep", (block, buffer)) if block else ("drop", buffer))
        self.buffer = buffer
        self.element_size = element_size
        self.widen = element_size // dt.itemsize
        self.block = block
        self.epoch = epoch


__all__ = ["WebGpuStorage"]

"""A runtime's device memory: its stream-ordered pool and the free list of blocks in front of it.

``cuMemPoolCreate`` with a release threshold, ``cuMemAllocFromPoolAsync``/``cuMemFreeAsync`` on
the runtime's stream, so a block freed while kernels using it still run is safe by stream
order. Freed blocks wait in a free list by size class (one stream orders their reuse); an
allocation the pool refuses is retried once after the cached blocks are given back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenferro_host import OutOfMemoryError
from tenferro_host.provider import FreeList

from ._driver import OUT_OF_MEMORY, check
from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._runtime import CudaRuntime

#: Pool memory kept after a synchronization instead of returning it to the OS.
DEFAULT_RELEASE_THRESHOLD = 1 << 30


class MemoryPool:
    """The pool of ``runtime`` on its stream (created with the primary context current) and
    :attr:`blocks`, the freed blocks by size class."""

    def __init__(self, runtime: CudaRuntime, release_threshold: int) -> None:
        self.runtime = runtime
        d = runtime.driver
        #: Freed pool blocks by size class; one stream orders their reuse.
        self.blocks: FreeList[int] = FreeList(rounded=True)
        props = d.CUmemPoolProps()
        props.allocType = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        props.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = runtime.index
        self.handle = check(d.cuMemPoolCreate(props), "cuMemPoolCreate")
        check(
            d.cuMemPoolSetAttribute(
                self.handle,
                d.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                d.cuuint64_t(release_threshold),
            ),
            "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
        )

    def stats(self) -> dict[str, int]:
        """Reserved and used bytes of the pool (current and high-water marks) and the free
        list's statistics (the pool's "used" bytes include the cached blocks)."""
        d = self.runtime.driver
        A = d.CUmemPool_attribute  # noqa: N806 - the driver's enum class
        names = {
            "reserved_current": A.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
            "reserved_high": A.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
            "used_current": A.CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
            "used_high": A.CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        }
        out = {}
        for key, attr in names.items():
            value = d.cuMemPoolGetAttribute(self.handle, attr)
            out[key] = int(value[1]) if int(value[0]) == 0 else -1
        out.update(self.blocks.stats())
        return out

    def new_block(self, nbytes: int, size: int, op: str | None) -> CudaStorage:
        """A new block of ``size`` bytes (0: exactly ``nbytes``) from the pool, retried once
        after the cached blocks are given back; OutOfMemoryError with the pool's stats."""
        rt = self.runtime
        result = self._alloc(size or nbytes)
        if int(result[0]) == OUT_OF_MEMORY and self.blocks.cached_bytes:
            self.free_cached()  # cached blocks are free memory: give them back, then retry
            result = self._alloc(size or nbytes)
        if int(result[0]) != 0:
            err = rt.fail(result[0], f"allocating {nbytes} bytes", op)
            if isinstance(err, OutOfMemoryError):
                stats = self.stats()
                raise OutOfMemoryError(
                    f"{rt.name}: out of device memory allocating {nbytes} bytes "
                    f"(pool: {stats}); free tensors, call runtime.trim(), or use smaller batches",
                    nbytes=nbytes,
                    pool_stats=stats,
                    op=op,
                )
            raise err
        return CudaStorage(rt, int(result[1]), nbytes, block=size)

    def _alloc(self, nbytes: int) -> Any:
        rt = self.runtime
        with rt.primary:
            return rt.driver.cuMemAllocFromPoolAsync(nbytes, self.handle, rt.stream_handle)

    def free(self, ptr: int) -> None:
        """Free ``ptr`` to the pool, stream-ordered (the context current); an error is counted
        in the runtime's ``deferred_errors``."""
        rt = self.runtime
        if int(rt.driver.cuMemFreeAsync(ptr, rt.stream_handle)[0]) != 0:
            rt.deferred_errors += 1

    def give_back(self, ptr: int, block: int) -> None:
        """Return ``ptr`` (of size class ``block``; 0: none) to the free list, or free it."""
        if block and self.blocks.put(block, ptr):
            return
        with self.runtime.primary:
            self.free(ptr)

    def free_cached(self) -> None:
        """Free every cached block to the pool, stream-ordered (trim, OOM retry, close)."""
        blocks = self.blocks.drain()
        if not blocks:
            return
        with self.runtime.primary:
            for ptr in blocks:
                self.free(ptr)

    def trim(self) -> None:
        """Free the cached blocks and return the pool's free memory to the OS."""
        self.free_cached()
        rt = self.runtime
        rt.ok(rt.driver.cuMemPoolTrimTo(self.handle, 0), "cuMemPoolTrimTo")

    def destroy(self) -> None:
        """Destroy the pool (at close: the stream drained, every block freed)."""
        self.runtime.driver.cuMemPoolDestroy(self.handle)


__all__ = ["DEFAULT_RELEASE_THRESHOLD", "MemoryPool"]

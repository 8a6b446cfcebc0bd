"""What a runtime's deferred releases become: freed blocks back to the free list or the pool,
modules unloaded and foreign DLPack deleters run once the stream has passed their last use.

Storages collected by the garbage collector — on any thread, after shutdown, after a fault —
and unloaded modules queue ``(kind, handle)`` releases; the runtime drains the queue at
allocation, session entry and ``synchronize`` and hands it here. Errors are counted in the
runtime's ``deferred_errors``, never raised.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from tenferro_host.provider import Lease, Release

from ._dlpack import call_deleter

if TYPE_CHECKING:
    from ._runtime import CudaRuntime


def carry_out(rt: CudaRuntime, releases: list[Release]) -> None:
    """Return freed blocks to the free list, free queued memory (stream-ordered) and unload
    queued modules; only what needs the driver makes a driver call."""
    if rt.closed:  # the stream was drained at close: only foreign deleters remain to run
        for kind, handle in releases:
            if kind == "dlpack":
                call_deleter(handle)
            elif kind != "drop":
                rt.deferred_errors += 1
        return
    work = _driver_work(rt, releases)
    if not work:
        return
    modules = []
    with rt.primary:
        for kind, handle in work:
            if kind == "dlpack":
                retire_deleter(rt, handle)
            elif kind == "module":
                modules.append(handle)
            elif kind == "call":  # a native graph's destruction or arena (_native_graph)
                handle()
            else:
                rt.memory.free(handle)
        if modules:
            retire_unloads(rt, modules)


def _driver_work(rt: CudaRuntime, releases: list[Release]) -> list[Release]:
    """The releases that need the driver: freed blocks go to the free list (a full one's are
    ``("memory", ptr)``), a dead graph's pins are released by dropping them."""
    work: list[Release] = []
    for kind, handle in releases:
        if kind == "drop":
            continue
        if kind == "block":
            ptr, size = handle
            if rt.memory.blocks.put(size, ptr):
                continue
            kind, handle = "memory", ptr
        work.append((kind, handle))
    return work


def retire_unloads(rt: CudaRuntime, libraries: list[Any]) -> None:
    """Unload ``libraries`` once the stream passes an event recorded now: every launch of
    their kernels was enqueued before their last reference went (context current)."""
    event = rt.events.record()
    rt.retirement.retire(
        event, [Lease(libraries, partial(_unload, rt)), Lease(event, rt.events.recycle)]
    )


def _unload(rt: CudaRuntime, libraries: list[Any]) -> None:
    """Unload ``libraries`` (a retired lease: the kernels using them have completed)."""
    for library in libraries:
        if int(rt.driver.cuLibraryUnload(library)[0]) != 0:
            rt.deferred_errors += 1
        rt.module_counts["unloaded"] += 1


def retire_deleter(rt: CudaRuntime, managed: Any) -> None:
    """Run a producer's DLPack deleter once the stream has passed an event recorded now
    (recorded under the context guard, as every event outside a raw session is)."""
    event = rt.record_event()
    rt.retirement.retire(event, [Lease(managed, call_deleter), Lease(event, rt.events.recycle)])


__all__ = ["carry_out"]

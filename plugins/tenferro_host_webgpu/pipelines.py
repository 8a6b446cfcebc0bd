"""Compiled compute pipelines of one device, cached and bounded; WGSL errors as CompileError.

Every shader this plugin generates has the same binding scheme: binding 0 is the uniform block
(:mod:`.dispatch`), bindings 1..n are storage buffers, read-only or read-write. Layouts are
explicit (never ``"auto"``), so a buffer the shader does not touch still binds.

Behind the in-memory cache, the persistent kernel cache keeps the WGSL of a key that has one
(:mod:`.wgsl_cache`): a new process skips generating it. Only WGSL whose pipeline was built is
stored; a stored one the adapter refuses is dropped with a warning and generated again.

Per dispatch, two more bounded caches save wgpu-py calls (each costs microseconds of Python):
:class:`UniformBuffers` keeps a uniform buffer per distinct uniform block (the contents never
change after creation, so a dispatch still pending in an encoder is never affected by a later
one), and :class:`BindGroups` keeps a bind group per (layout, uniform buffer, storage buffers)
while every storage buffer it binds is in use — owned by a live tensor or kept in the runtime's
free list of buffers (``runtime.pool``, a :class:`~tenferro_host.provider.FreeList`), whose
next tensor binds the same buffer object, so its group is still right. A buffer released for
good evicts its groups, so a cached group neither keeps released memory alive nor is used after
it.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenferro_host import CompileError
from tenferro_host.provider import Memo, MemoKind

if TYPE_CHECKING:
    from tenferro_host.provider import CachedKernel, KernelKey

_LOCATION = re.compile(r"wgsl:(\d+):(\d+)")


@dataclass(frozen=True)
class Pipeline:
    """A compute pipeline with its bind group layout and the WGSL it came from."""

    pipeline: Any
    layout: Any
    source: str
    keepalive: Any = None


def numbered(source: str) -> str:
    """The source with line numbers, as a compile log shows it."""
    return "\n".join(f"{i:4d} | {line}" for i, line in enumerate(source.splitlines(), 1))


def compile_error(
    exc: Exception, source: str, what: str, locate: Callable[[int], str], op: str | None
) -> CompileError:
    """A CompileError with the line and column in the generated WGSL and the DSL location."""
    text = str(getattr(exc, "message", "") or exc)
    found = _LOCATION.search(text)
    line = int(found.group(1)) if found else None
    column = int(found.group(2)) if found else None
    summary = next(
        (
            s.strip()
            for s in text.splitlines()
            if "error" in s.lower() and "validation" not in s.lower()
        ),
        text.strip().splitlines()[0] if text.strip() else type(exc).__name__,
    )
    where = f" at generated WGSL line {line}, column {column}" if line is not None else ""
    origin = locate(line) if line is not None else ""
    return CompileError(
        f"the WGSL generated for {what} does not compile{where}{origin}: {summary}; "
        "this is a code generation bug or a construct the adapter rejects — see .log",
        log=f"{text}\n--- generated WGSL ---\n{numbered(source)}",
        line=line,
        column=column,
        op=op,
    )


class PipelineCache:
    """Pipelines by key (bounded LRU); a miss compiles the WGSL and builds the layout."""

    def __init__(self, device: Any, max_entries: int = 256) -> None:
        self._device = device
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Pipeline] = OrderedDict()
        # Re-entrant and held while building: two threads missing one key build it once.
        self._lock = threading.RLock()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: Hashable) -> Pipeline | None:
        """The cached pipeline for ``key``, or None: the per-launch path, which builds none of
        the closures a miss needs."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self.hits += 1
                self._entries.move_to_end(key)
            return found

    def get(
        self,
        key: Hashable,
        source: Callable[[], tuple[str, tuple[bool, ...]]],
        *,
        what: str,
        keepalive: Any = None,
        locate: Callable[[int], str] = lambda line: "",
        op: str | None = None,
        stored: Callable[[], KernelKey | None] = lambda: None,
    ) -> Pipeline:
        """The pipeline for ``key``; ``source()`` gives (WGSL, writable flag per storage buffer).
        ``keepalive`` is held as long as the entry (an object whose id is part of ``key``).
        ``stored()`` is the source's persistent-cache key, asked for on an in-memory miss."""

        def build(text: str, writable: tuple[bool, ...]) -> Pipeline:
            return self._build(text, writable, what, locate, op, keepalive)

        with self._lock:
            found = self.lookup(key)
            if found is not None:
                return found
            self.misses += 1
            pipeline = self._load_or_build(source, stored, build)
            self._entries[key] = pipeline
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return pipeline

    @staticmethod
    def _load_or_build(
        source: Callable[[], tuple[str, tuple[bool, ...]]],
        stored: Callable[[], KernelKey | None],
        build: Callable[[str, tuple[bool, ...]], Pipeline],
    ) -> Pipeline:
        """The pipeline, from the persistent cache's WGSL when it has the key's."""
        from tenferro_host.provider import active_kernel_cache

        from . import wgsl_cache

        cache = active_kernel_cache()
        persistent = stored() if cache is not None else None
        if cache is None or persistent is None:
            return build(*source())
        built: list[Pipeline] = []

        def generate() -> CachedKernel:
            text, writable = source()
            built.append(build(text, writable))  # a CompileError propagates: nothing stored
            return wgsl_cache.entry(text, writable)

        found = cache.load_or_build(persistent, generate)
        if built:
            return built[0]
        unpacked = wgsl_cache.unpack(found)
        try:
            if unpacked is not None:
                return build(*unpacked)
            reason = "it holds no WGSL with its bindings' access modes"
        except CompileError as exc:  # a WGSL that passed its checksum but not the adapter
            reason = f"the adapter refused its WGSL: {exc}"
        cache.reject(persistent, found, reason)  # warns; regenerated once, below
        again = cache.load_or_build(persistent, generate)
        if built:
            return built[0]
        if again == found:  # still there: a cache it could not be removed from (read-only)
            return build(*source())
        return build(*(wgsl_cache.unpack(again) or source()))

    def _build(
        self,
        source: str,
        writable: tuple[bool, ...],
        what: str,
        locate: Callable[[int], str],
        op: str | None,
        keepalive: Any,
    ) -> Pipeline:
        import wgpu

        device = self._device
        try:
            module = device.create_shader_module(code=source)
        except wgpu.GPUError as exc:
            raise compile_error(exc, source, what, locate, op) from exc
        stage = wgpu.ShaderStage.COMPUTE
        entries: list[dict[str, Any]] = [
            {"binding": 0, "visibility": stage, "buffer": {"type": "uniform"}}
        ]
        for i, rw in enumerate(writable, 1):
            kind = "storage" if rw else "read-only-storage"
            entries.append({"binding": i, "visibility": stage, "buffer": {"type": kind}})
        layout = device.create_bind_group_layout(entries=entries)
        try:
            pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": "main"},
            )
        except wgpu.GPUError as exc:
            raise compile_error(exc, source, what, locate, op) from exc
        return Pipeline(pipeline, layout, source, keepalive)


#: A runtime's uniform buffers by key (LRU, evicted as the cache's bound says).
UNIFORM_BUFFERS = MemoKind("webgpu.uniform_buffers", 256, lru=True, what="uniform buffers")


class UniformBuffers:
    """Immutable uniform buffers by key (bounded LRU): one per distinct uniform block.

    ``key`` must determine the block's bytes exactly (its owner builds it from the values the
    block is packed from, scalars by their bits); ``pack()`` makes them on a miss. An entry
    holds ``keepalive`` (an object whose id is part of the key).
    """

    def __init__(self, device: Any, max_entries: int = 256) -> None:
        import wgpu

        self._device = device
        self._usage = wgpu.BufferUsage.UNIFORM
        self._entries: Memo[Hashable, tuple[Any, Any]] = UNIFORM_BUFFERS.new(max_entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def max_entries(self) -> int:
        """The bound in buffers (settable)."""
        return self._entries.bound

    @max_entries.setter
    def max_entries(self, bound: int) -> None:
        self._entries.bound = bound

    @property
    def hits(self) -> int:
        """Lookups that found their buffer."""
        return self._entries.hits

    @property
    def misses(self) -> int:
        """Lookups that packed a new buffer."""
        return self._entries.misses

    def get(self, key: Hashable, pack: Callable[[], bytes], keepalive: Any = None) -> Any:
        """The cached value for ``key``, made from ``pack()`` on a miss; ``keepalive`` is what
        the entry must hold alive."""
        found = self._entries.get(key)
        if found is not None:
            return found[0]
        data = pack()
        buffer = self._device.create_buffer_with_data(data=data, usage=self._usage)
        self._entries.put(key, (buffer, keepalive))
        return buffer

    def new(self, data: bytes) -> Any:
        """A uniform buffer with ``data``, not cached (a block used once)."""
        return self._device.create_buffer_with_data(data=data, usage=self._usage)


class BindGroups:
    """Bind groups by (layout, uniform buffer, storage buffers), bounded LRU, evicted when a
    storage buffer they bind is released (:meth:`forget`).

    A key is made of the ids of objects its entry holds, so no id in a live key can be reused
    by another object. The runtime calls :meth:`forget` for a buffer that goes for good: a freed
    tensor's buffer the pool does not keep, or one the pool lets go (full, trim, out of memory).
    A buffer that goes back to the pool keeps its groups: the tensor that takes it next binds
    the same buffer object, so the same key, and the group binds exactly that memory. Eviction
    happens at once, or — when the cache is busy on the thread a collector interrupted — at the
    next lookup; wgpu frees the buffer when the last group holding it goes.
    """

    def __init__(self, device: Any, max_entries: int = 256) -> None:
        self._device = device
        self.max_entries = max_entries
        #: key -> (group, objects the key's ids belong to)
        self._entries: OrderedDict[tuple[int, ...], tuple[Any, tuple[Any, ...]]] = OrderedDict()
        #: id(buffer) -> keys binding it, for the buffers of tensors' storages
        self._keys: dict[int, set[tuple[int, ...]]] = {}
        self._dead: list[int] = []
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, layout: Any, params: Any, buffers: Sequence[Any], owners: Sequence[Any]) -> Any:
        """The bind group of ``params`` at binding 0 and ``buffers`` at 1..n; ``owners`` are the
        storages owning some of the buffers (each has ``.buffer``), whose buffers the runtime
        may :meth:`forget`."""
        key = (id(layout), id(params), *map(id, buffers))
        with self._lock:
            if self._dead:
                self._purge()
            found = self._entries.get(key)
            if found is not None:
                self.hits += 1
                self._entries.move_to_end(key)
                return found[0]
        entries = [{"binding": 0, "resource": {"buffer": params}}]
        entries += [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers, 1)]
        group = self._device.create_bind_group(layout=layout, entries=entries)
        with self._lock:
            self.misses += 1
            self._entries[key] = (group, (layout, params, *buffers))
            index = self._keys
            for storage in owners:
                bid = id(storage.buffer)
                keys = index.get(bid)
                if keys is None:
                    keys = index[bid] = set()
                keys.add(key)
            while len(self._entries) > self.max_entries:
                old, _ = self._entries.popitem(last=False)
                self.evictions += 1
                self._unlink(old)
        return group

    def forget(self, buffer: Any) -> None:
        """Evict every group binding ``buffer`` (released for good); safe from a finalizer on
        any thread, including one that interrupted this cache's own lookup."""
        bid = id(buffer)
        if bid not in self._keys:
            return
        self._dead.append(bid)  # atomic; purged now unless this thread holds the lock
        if self._lock.acquire(blocking=False):
            try:
                self._purge()
            finally:
                self._lock.release()

    def _purge(self) -> None:
        """Evict the groups of the buffers forgotten (under the lock)."""
        while self._dead:
            bid = self._dead.pop()
            for key in self._keys.pop(bid, ()):
                if self._entries.pop(key, None) is not None:
                    self.evictions += 1
                    self._unlink(key)

    def _unlink(self, key: tuple[int, ...]) -> None:
        """Forget ``key`` in the per-buffer index (an entry that left the cache)."""
        for bid in key[2:]:
            keys = self._keys.get(bid)
            if keys is not None:
                keys.discard(key)


__all__ = [
    "BindGroups",
    "Pipeline",
    "PipelineCache",
    "UniformBuffers",
    "compile_error",
    "numbered",
]

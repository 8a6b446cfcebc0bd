"""Compiled compute pipelines of one device, cached and bounded; WGSL errors as CompileError.

Every shader this plugin generates has the same binding scheme: binding 0 is the uniform block
(:mod:`.dispatch`), bindings 1..n are storage buffers, read-only or read-write. Layouts are
explicit (never ``"auto"``), so a buffer the shader does not touch still binds.

Behind the in-memory cache, the persistent kernel cache keeps the WGSL of a key that has one
(:mod:`.wgsl_cache`): a new process skips generating it. Only WGSL whose pipeline was built is
stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenferro_host.errors import CompileError
from tenferro_host.provider import ResourceCache

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
        self._cache = ResourceCache(max_entries=max_entries, max_bytes=1 << 62)

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

        return self._cache.get(key, lambda: self._load_or_build(source, stored, build), nbytes=0)

    @staticmethod
    def _load_or_build(
        source: Callable[[], tuple[str, tuple[bool, ...]]],
        stored: Callable[[], KernelKey | None],
        build: Callable[[str, tuple[bool, ...]], Pipeline],
    ) -> Pipeline:
        """The pipeline, from the persistent cache's WGSL when it has the key's."""
        from tenferro_host.provider.kernel_cache import active_kernel_cache

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
        return build(*(wgsl_cache.unpack(found) or source()))

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


__all__ = ["Pipeline", "PipelineCache", "compile_error", "numbered"]

"""Adapter discovery and selection: every adapter wgpu sees, best first.

The order is the device index order of the ``webgpu`` backend: hardware before software,
discrete before integrated before virtual, native APIs (Vulkan, Metal, D3D12) before OpenGL.
``TENFERRO_WEBGPU_ADAPTER`` (an index into that order, or a case-insensitive substring of the
adapter's name or API) moves the chosen adapter to index 0, so ``webgpu`` means it.

wgpu is imported here only inside functions: importing the plugin loads no GPU library.
:func:`adapters` (what ``caps`` lists) answers from the probe cache when the driver files are
unchanged (wgpu's native library, the Vulkan ICD files and the drivers they name, the GPU
device nodes); :func:`adapter` always enumerates, since a runtime needs the live adapter.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tenferro_host import UnsupportedError, ValidationError

ADAPTER_ENV = "TENFERRO_WEBGPU_ADAPTER"

_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "Unknown": 3, "CPU": 4}
_NATIVE_APIS = ("Vulkan", "Metal", "D3D12")
_SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "swiftshader", "softpipe", "microsoft basic render")


@dataclass(frozen=True)
class AdapterInfo:
    """One adapter as ``caps`` lists it; ``index`` is its device index in the ``webgpu`` kind."""

    index: int
    name: str
    vendor: str
    adapter_type: str
    backend: str
    software: bool
    features: frozenset[str]
    limits: dict[str, int] = field(compare=False, hash=False)
    #: whether this description came from the probe cache rather than a live enumeration
    from_cache: bool = field(default=False, compare=False)

    def describe(self) -> dict[str, Any]:
        """The device entry of ``caps --json``."""
        return {
            "index": self.index,
            "name": self.name,
            "vendor": self.vendor,
            "type": self.adapter_type,
            "api": self.backend,
            "software": self.software,
            "shader_f16": "shader-f16" in self.features,
            "probe": "cache" if self.from_cache else "live",
        }


def _is_software(info: dict[str, Any]) -> bool:
    name = f"{info.get('device', '')} {info.get('vendor', '')}".lower()
    return info.get("adapter_type") == "CPU" or any(s in name for s in _SOFTWARE_NAMES)


def _rank(info: dict[str, Any]) -> tuple[int, int, int]:
    api = info.get("backend_type", "")
    return (
        int(_is_software(info)),
        _TYPE_RANK.get(str(info.get("adapter_type", "Unknown")), 3),
        0 if api in _NATIVE_APIS else 1,
    )


class _Discovery:
    """The process-wide adapter list (wgpu enumerates adapters once per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: list[tuple[dict[str, Any], Any]] | None = None

    def ordered(self) -> list[tuple[dict[str, Any], Any]]:
        """(info, GPUAdapter) pairs, best first; raises UnsupportedError without wgpu."""
        with self._lock:
            if self._found is None:
                try:
                    import wgpu
                except ImportError as exc:
                    raise UnsupportedError(
                        "wgpu is not installed; install the extra: pip install "
                        "'tenferro-host[webgpu]'",
                        backend="webgpu",
                        feature="wgpu",
                    ) from exc
                with _private_runtime_dir():
                    found = [(dict(a.info), a) for a in wgpu.gpu.enumerate_adapters_sync()]
                found.sort(key=lambda pair: _rank(pair[0]))
                self._found = found
            return list(self._found)


_discovery = _Discovery()


@contextmanager
def _private_runtime_dir() -> Iterator[None]:
    """A private XDG_RUNTIME_DIR while Mesa probes when the user's is unset or invalid, so
    Mesa's "XDG_RUNTIME_DIR is invalid" lines never reach the program's stderr."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current) and os.access(current, os.W_OK):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="tenferro-xdg-") as private:
        os.environ["XDG_RUNTIME_DIR"] = private
        try:
            yield
        finally:
            if current is None:
                del os.environ["XDG_RUNTIME_DIR"]
            else:
                os.environ["XDG_RUNTIME_DIR"] = current


def _choose(pairs: list[Any]) -> list[Any]:
    """Apply ``TENFERRO_WEBGPU_ADAPTER``: the chosen adapter first, the rest in order."""
    wanted = os.environ.get(ADAPTER_ENV, "").strip()
    if not wanted:
        return pairs
    if wanted.isdigit():
        at = int(wanted)
        if at >= len(pairs):
            raise ValidationError(
                f"{ADAPTER_ENV}={wanted} but there are {len(pairs)} adapter(s); use an index "
                f"below {len(pairs)} or a name substring (see `tenferro-host caps`)",
                argument=ADAPTER_ENV,
            )
    else:
        needle = wanted.lower()
        hits = [
            i
            for i, (info, *_) in enumerate(pairs)
            if needle in f"{info.get('device', '')} {info.get('backend_type', '')}".lower()
        ]
        if not hits:
            names = "; ".join(
                f"{info.get('device', '?')} ({info.get('backend_type', '?')})" for info, *_ in pairs
            )
            raise ValidationError(
                f"{ADAPTER_ENV}={wanted!r} matches no adapter; adapters: {names or 'none'}",
                argument=ADAPTER_ENV,
            )
        at = hits[0]
    return [pairs[at], *pairs[:at], *pairs[at + 1 :]]


def _describe(
    index: int, info: dict[str, Any], features: Any, limits: Any, from_cache: bool = False
) -> AdapterInfo:
    return AdapterInfo(
        index=index,
        name=str(info.get("device", "")),
        vendor=str(info.get("vendor", "")),
        adapter_type=str(info.get("adapter_type", "Unknown")),
        backend=str(info.get("backend_type", "")),
        software=_is_software(info),
        features=frozenset(features),
        limits=dict(limits),
        from_cache=from_cache,
    )


def _selected() -> list[tuple[AdapterInfo, Any]]:
    chosen = _choose(_discovery.ordered())
    return [
        (_describe(i, info, adapter.features, adapter.limits), adapter)
        for i, (info, adapter) in enumerate(chosen)
    ]


def _driver_files() -> list[str]:
    """The files an enumeration's answer depends on (see the module docstring)."""
    import glob
    import importlib.util

    files: list[str] = []
    spec = importlib.util.find_spec("wgpu")
    for root in (spec.submodule_search_locations or []) if spec else []:
        files += glob.glob(os.path.join(root, "resources", "*wgpu_native*"))
        files.append(os.path.join(root, "__init__.py"))  # its version
    icds = [
        p
        for var in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES")
        for p in os.environ.get(var, "").split(os.pathsep)
        if p
    ]
    for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d"):
        icds += glob.glob(os.path.join(d, "*.json"))
    for icd in icds:
        files.append(icd)
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError), open(icd) as f:
            files.append(str(json.load(f)["ICD"]["library_path"]))
    return files + glob.glob("/dev/dri/*") + glob.glob("/dev/nvidia*")


def adapters() -> list[AdapterInfo]:
    """Every WebGPU adapter, in device index order (selection applied), from the probe cache
    when the driver files did not change."""
    from tenferro_host.provider import cached_probe

    def enumerate_now() -> list[Any]:
        return [
            [info, sorted(adapter.features), dict(adapter.limits)]
            for info, adapter in _discovery.ordered()
        ]

    facts = {k: v for k, v in os.environ.items() if k.startswith("WGPU_")}
    found, from_cache = cached_probe("webgpu-adapters", _driver_files(), facts, enumerate_now)
    return [
        _describe(i, info, features, limits, from_cache)
        for i, (info, features, limits) in enumerate(_choose(found))
    ]


def adapter(index: int) -> tuple[AdapterInfo, Any]:
    """The adapter with device index ``index`` and its wgpu object."""
    found = _selected()
    if not 0 <= index < len(found):
        raise ValidationError(
            f"webgpu has {len(found)} adapter(s); use an index below {len(found)}",
            argument="index",
        )
    return found[index]


__all__ = ["ADAPTER_ENV", "AdapterInfo", "adapter", "adapters"]

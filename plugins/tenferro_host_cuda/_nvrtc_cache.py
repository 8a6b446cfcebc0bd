"""The persistent-cache key of an NVRTC compile: source, headers, options, compiler, target, host.

Headers are found the way NVRTC finds them, by following ``#include`` lines (every one, also in
disabled ``#if`` branches: a needless header costs at most a recompile). A quoted name is looked
up in the including file's directory (for the main source: the directory of its name, relative
to the working directory), then in the ``-I`` directories; an angle name in the ``-I``
directories only; a name in none of them is one of NVRTC's built-in headers (``cuda_fp16.h``
...), which the compiler's identity covers. An ``#include`` of a macro cannot be followed
without preprocessing, so such a source gets no key and is compiled every time.

The source's file name is not part of the key (the same source under another name loads the
same image) unless line information or device debugging embeds it in the image.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tenferro_host import __version__
from tenferro_host.provider import KernelKey

from ._driver import nvrtc_bindings

if TYPE_CHECKING:
    from ._nvrtc import NvrtcOptions

#: Patterns compiled at their first use (``re``'s own cache), not at import: a source without
#: ``#include`` and options without include flags never compile them.
_INCLUDE = rb'(?m)^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]*)"|<([^>\n]*)>|(.*))'
_INCLUDE_FLAG = r"^(?:-I|--include-path=)(.+)$"
_PRE_INCLUDE_FLAG = r"^(?:-include=?|--pre-include=)(.+)$"
_DEBUG_FLAGS = ("-G", "--device-debug", "-lineinfo", "--generate-line-info")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _find(spelling: str, dirs: Sequence[Path]) -> Path | None:
    for d in dirs:
        path = d / spelling
        if path.is_file():
            return path
    return None


def headers_digest(
    source: bytes, name: str, include_dirs: Sequence[str], pre_includes: Sequence[str] = ()
) -> str | None:
    """A digest of every header ``source`` includes, transitively; None if one is a macro."""
    dirs = [Path(d) for d in include_dirs]
    record: list[tuple[str, str]] = []
    seen: set[Path] = set()
    pending: list[tuple[bytes, Path]] = [(source, Path(name).parent)]
    for spelling in pre_includes:
        pending.extend(_visit(spelling, _find(spelling, dirs), record, seen))
    while pending:
        text, here = pending.pop()
        if b"include" not in text:
            continue
        for quoted, angled, other in re.findall(_INCLUDE, text):
            if other.strip() and not quoted and not angled:
                return None  # `#include MACRO`
            spelling = (quoted or angled).decode(errors="surrogateescape")
            found = _find(spelling, [here, *dirs] if quoted else dirs)
            pending.extend(_visit(spelling, found, record, seen))
    return _sha(json.dumps(record).encode())


def _visit(
    spelling: str, path: Path | None, record: list[tuple[str, str]], seen: set[Path]
) -> list[tuple[bytes, Path]]:
    """Record one include; the header's text to scan next, if it is a file not seen before."""
    if path is None:
        record.append((spelling, "builtin"))
        return []
    resolved = path.resolve()
    data = resolved.read_bytes()
    record.append((spelling, _sha(data)))
    if resolved in seen:
        return []
    seen.add(resolved)
    return [(data, path.parent)]


def compiler_identity() -> str:
    """The NVRTC library file a compile uses: its resolved path, size and mtime (a patch
    release with the same version number is another compiler), found WITHOUT loading NVRTC
    where that is sound; UnsupportedError without NVRTC.

    The file is the one ``cuda.pathfinder`` (which ``cuda.bindings`` loads NVRTC through) picks:
    a ``libnvrtc`` already loaded in the process, else the first in the ``nvidia-cuda-nvrtc``
    wheel directories of site-packages, found by pathfinder's own (file-only) search step; only
    when neither applies is NVRTC loaded to learn where it lives. Importing
    ``cuda.bindings.nvrtc`` and loading the 100 MB library is 15 ms of a first persistent-cache
    hit on the H200 (20-55 ms on a 2-core machine). Only a loaded library's identity is
    remembered: until then another component may still load a different ``libnvrtc`` first.
    """
    if _loaded is not None:
        return _loaded
    try:
        wheel = _wheel_library()
    except Exception:  # noqa: BLE001 - a pathfinder without this private step: load NVRTC
        wheel = None
    if wheel is not None:
        return f"nvrtc {_file_identity(wheel)}"
    return _loaded_identity()


def _file_identity(path: str) -> str:
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def _wheel_library() -> str | None:
    """The wheel's libnvrtc the loader will pick, or None when it is loaded already (the
    loader keeps that one) or none is in site-packages (the loader searches the system)."""
    from cuda.pathfinder._dynamic_libs.lib_descriptor import LIB_DESCRIPTORS
    from cuda.pathfinder._dynamic_libs.platform_loader import LOADER
    from cuda.pathfinder._dynamic_libs.search_steps import SearchContext, find_in_site_packages

    desc = LIB_DESCRIPTORS["nvrtc"]
    if desc.dependencies or LOADER.check_if_already_loaded_from_elsewhere(desc) is not None:
        return None
    found = find_in_site_packages(SearchContext(desc))
    return None if found is None else str(found.abs_path)


_loaded: str | None = None  # the identity of the NVRTC loaded into this process, once known


def _loaded_identity() -> str:
    """The identity of the NVRTC library loaded into this process (loading it if need be)."""
    global _loaded
    _err, major, minor = nvrtc_bindings().nvrtcVersion()
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        _loaded = f"nvrtc {_file_identity(str(load_nvidia_dynamic_lib('nvrtc').abs_path))}"
    except Exception:  # noqa: BLE001 - the version alone still names the compiler
        _loaded = f"nvrtc {major}.{minor} library path unknown"
    return _loaded


def nvrtc_key(
    source: bytes, options: NvrtcOptions, arch: str, is_ptx: bool, name: str
) -> KernelKey | None:
    """The cache key of one compile, or None when its headers cannot be followed."""
    flags = options.flags(arch)[1:]  # the architecture is the "target" part
    dirs = [*options.include_dirs]
    pre: list[str] = []
    for flag in options.extra:
        if found := re.match(_INCLUDE_FLAG, flag):
            dirs.append(found.group(1))
        elif found := re.match(_PRE_INCLUDE_FLAG, flag):
            pre.append(found.group(1))
    try:
        headers = headers_digest(source, name, dirs, pre)
    except OSError:
        return None
    if headers is None:
        return None
    parts = {
        "source": _sha(source),
        "headers": headers,
        "options": _sha(json.dumps([flags, list(options.name_expressions)]).encode()),
        "target": f"{arch} {'ptx' if is_ptx else 'cubin'}",
        "compiler": compiler_identity(),
        "host": f"tenferro-host {__version__}",
    }
    if any(f in _DEBUG_FLAGS for f in flags):
        parts["name"] = name  # embedded in the image's debug information
    return KernelKey("nvrtc", name, parts)


__all__ = ["compiler_identity", "headers_digest", "nvrtc_key"]

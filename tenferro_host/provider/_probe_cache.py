"""A backend's probe result kept across processes, keyed on the files its answer depends on.

Discovery can be slow (wgpu parses its C header and asks every Vulkan driver for adapters:
about 1.5 s), and ``caps`` only needs what discovery found. :func:`cached_probe` stores a
JSON-serializable answer in its own directory (:func:`probe_dir`) under a key made of each named
file's path, size and modification time and the given facts (versions, environment), so a
changed or reinstalled driver is probed again. ``TENFERRO_PROBE_CACHE=0`` turns it off. A
failing probe is never stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ENV_SWITCH = "TENFERRO_PROBE_CACHE"
ENV_DIR = "TENFERRO_PROBE_CACHE_DIR"
_FORMAT = 1


def probe_dir() -> Path:
    """``$TENFERRO_PROBE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tenferro-host/probes`` (beside the
    kernel cache's default directory, never inside the kernel cache)."""
    explicit = os.environ.get(ENV_DIR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tenferro-host" / "probes"


def file_facts(paths: Iterable[str | os.PathLike[str]]) -> list[list[Any]]:
    """(path, size, mtime in ns) of each existing file, sorted: what a probe key hashes."""
    facts = []
    for p in sorted({os.fspath(p) for p in paths}):
        with contextlib.suppress(OSError):
            st = os.stat(p)
            facts.append([p, st.st_size, st.st_mtime_ns])
    return facts


def cached_probe(
    name: str,
    files: Iterable[str | os.PathLike[str]],
    facts: Any,
    probe: Callable[[], Any],
    *,
    refresh: bool = False,
) -> tuple[Any, bool]:
    """``(answer, from_cache)``: the stored answer of ``name`` for these files and facts, else
    (or with ``refresh``) ``probe()``, stored when it returns."""
    if os.environ.get(ENV_SWITCH, "1").strip() == "0":
        return probe(), False
    try:
        key = json.dumps([_FORMAT, name, file_facts(files), facts], sort_keys=True)
    except (TypeError, ValueError):  # facts JSON cannot hold: nothing to key on
        return probe(), False
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    path = probe_dir() / f"{name}-{digest}.json"
    if not refresh:
        with contextlib.suppress(OSError, ValueError, AttributeError, KeyError):
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                return stored["answer"], True
    answer = probe()
    with contextlib.suppress(OSError, TypeError, ValueError):
        _store(path, json.dumps({"key": key, "answer": answer}))
    return answer, False


def _store(path: Path, text: str) -> None:
    """Write atomically: a concurrent reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probe-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["ENV_DIR", "ENV_SWITCH", "cached_probe", "file_facts", "probe_dir"]

"""Autotuning tables: the winners this machine learned and the tables a package ships.

A *learned* winner is one entry of the persistent kernel cache (kind ``autotune``, an empty
payload, the winner in its metadata), so it shares the cache's directory, trust checks, atomic
writes, checksums, bound and ``cache clear``. Its key holds the kernel's identity (name, file,
a digest of its code and of its configs), the device (:func:`device_key`) and the key
values of the launch: a kernel or config list that changed, another chip or driver, another
shape all miss.

A *shipped* table is a JSON file in the package, by default next to the kernel's module
(``<module>.autotune.json``)::

    {"format": 1, "kernels": {"matmul": [
        {"device": {"target": "cuda", "arch": "sm_90"},
         "key": {"a": "float32[4096, 4096]"},
         "config": {"constants": {"BM": 128, "BN": 128}, "dim": [16, 16]}}]}}

An entry matches when every device and key field it names equals the launch's (a field it
leaves out matches anything); the entry naming the most fields wins, the earlier one on a tie.
A config is read by :class:`~tenferro_host.kernel.Config`, so it takes the same forms
(``"dim": 64`` is ``[64]``) and a wrong field is a ValidationError naming the file, the kernel
and the field, when the table is read.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ..kernel._autotune import Config
from ._cache_dir import read_private
from ._cache_entry import CachedKernel, KernelKey, UnusableEntry, decode_entry
from ._kernel_cache import active_kernel_cache

TABLE_FORMAT = 1
KIND = "autotune"
SHIPPED_SUFFIX = ".autotune.json"
_MAX_WINNER_BYTES = 1 << 16  # a learned winner's entry is far smaller

#: device_info attribute -> the device key's field (those a backend's info has)
_DEVICE_FIELDS = (
    ("name", "name"),
    ("arch", "arch"),
    ("multiprocessors", "sms"),
    ("driver_version", "driver"),
    ("api", "api"),
    ("vendor", "vendor"),
    ("adapter_type", "adapter_type"),
)

#: Every shipped table an autotuned kernel of this process found (``cache tables`` lists them).
SHIPPED_SEEN: set[Path] = set()


def device_key(target: str, info: Any) -> dict[str, str]:
    """The chip a winner holds for: the target and what the backend's ``device_info`` says of
    it (CUDA: name, ``sm_XY``, SM count, driver version; WebGPU: adapter name, API, vendor,
    type; CPU: the processor's name)."""
    key = {"target": target}
    for attr, field in _DEVICE_FIELDS:
        value = getattr(info, attr, None)
        if value is None:
            continue
        key[field] = ".".join(map(str, value)) if isinstance(value, tuple) else str(value)
    return key


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def learned_key(
    identity: Mapping[str, str], device: Mapping[str, str], key: Mapping[str, str]
) -> KernelKey:
    """The kernel cache key of one learned winner."""
    parts = {**identity, "device": _canonical(device), "key": _canonical(key)}
    return KernelKey(KIND, f"{identity['file']}:{identity['kernel']}", parts)


class _NotLearned(Exception):  # noqa: N818 - a control-flow signal: the lookup's "build"
    pass


def read_learned(cache: Any, kkey: KernelKey) -> Mapping[str, Any] | None:
    """The winner stored under ``kkey`` (its metadata), or None. A lookup never stores."""

    def missing() -> CachedKernel:
        raise _NotLearned

    try:
        return cache.load_or_build(kkey, missing).meta
    except _NotLearned:
        return None


def store_learned(cache: Any, kkey: KernelKey, meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """Store a winner; the one stored first wins when processes tuned at once (returned)."""
    return cache.load_or_build(kkey, lambda: CachedKernel(b"", dict(meta))).meta


def learned_tables(root: Path) -> list[dict[str, Any]]:
    """Every learned winner in the cache directory ``root`` (unreadable entries are skipped)."""
    rows: list[dict[str, Any]] = []
    entries = root / "entries"
    with contextlib.suppress(OSError):
        for path in sorted(entries.glob("*/*")):
            try:
                if path.stat().st_size > _MAX_WINNER_BYTES:  # a compiled kernel: not read
                    continue
                meta = decode_entry(read_private(path), path.name).meta
            except (OSError, UnusableEntry):
                continue
            if meta.get("autotune") == TABLE_FORMAT:
                rows.append({"source": "learned", "where": str(path), **_row(meta)})
    return rows


def _row(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kernel": meta.get("kernel"),
        "device": meta.get("device"),
        "key": meta.get("key"),
        "config": meta.get("config"),
    }


# -- shipped tables -----------------------------------------------------------------------------
_LOADED: dict[Path, tuple[int, dict[str, list[dict[str, Any]]]]] = {}


def load_shipped(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The entries of a shipped table by kernel name (read once per modification); a file that
    is not such a table is a :class:`ValidationError` naming it and what is wrong."""
    stamp = os.stat(path).st_mtime_ns
    found = _LOADED.get(path)
    if found is not None and found[0] == stamp:
        return found[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad(path, f"it is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != TABLE_FORMAT:
        raise _bad(path, f'it needs {{"format": {TABLE_FORMAT}, "kernels": {{...}}}} at the top')
    kernels = data.get("kernels")
    if not isinstance(kernels, dict):
        raise _bad(path, '"kernels" must map kernel names to lists of entries')
    checked: dict[str, list[dict[str, Any]]] = {}
    for name, entries in kernels.items():
        if not isinstance(entries, list):
            raise _bad(path, f"the entries of kernel {name!r} must be a list")
        checked[name] = [_checked_entry(path, name, i, entry) for i, entry in enumerate(entries)]
    _LOADED[path] = (stamp, checked)
    return checked


def _checked_entry(path: Path, kernel: str, i: int, entry: Any) -> dict[str, Any]:
    """``entry`` with its config in the plain form, read as :class:`Config` reads one."""
    where = f"entry {i} of kernel {kernel!r}"
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        raise _bad(path, f'{where} needs a "config" object ({{"constants": ..., "dim": ...}})')
    for field in ("device", "key"):
        fields = entry.get(field, {})
        if not isinstance(fields, dict) or not all(isinstance(v, str) for v in fields.values()):
            raise _bad(path, f'{where}: "{field}" must map names to strings')
    config = entry["config"]
    unknown = sorted(set(config) - {"constants", "dim"})
    if unknown:
        raise _bad(
            path,
            f'the "config" of {where} has {unknown[0]!r}; a config has only "constants" and "dim"',
        )
    try:
        plain = Config(config.get("constants"), dim=config.get("dim")).plain()
    except ValidationError as exc:
        raise _bad(
            path, f'the "config" of {where} has a wrong {exc.argument!r}: {exc.message}'
        ) from None
    return {**entry, "config": plain}


def _bad(path: Path, why: str) -> ValidationError:
    return ValidationError(
        f"the autotuning table {path} cannot be used: {why}; fix the file or remove it",
        argument="table",
    )


def match_entry(
    entries: Sequence[Mapping[str, Any]], device: Mapping[str, str], key: Mapping[str, str]
) -> Mapping[str, Any] | None:
    """The entry for this device and key: all of its fields equal, the most fields, the
    earliest on a tie; None when none matches."""
    best: tuple[int, Mapping[str, Any]] | None = None
    have = {**device, **{f"key.{k}": v for k, v in key.items()}}
    for entry in entries:
        wanted = {
            **entry.get("device", {}),
            **{f"key.{k}": v for k, v in entry.get("key", {}).items()},
        }
        matches = all(have.get(k) == v for k, v in wanted.items())
        if matches and (best is None or len(wanted) > best[0]):
            best = (len(wanted), entry)
    return None if best is None else best[1]


def shipped_tables(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Every entry of the shipped tables at ``paths`` (a table that fails to load: one row
    saying why)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(set(paths)):
        try:
            kernels = load_shipped(path)
        except ValidationError as exc:
            rows.append({"source": "shipped", "where": str(path), "error": exc.message})
            continue
        for name, entries in kernels.items():
            for entry in entries:
                rows.append(
                    {
                        "source": "shipped",
                        "where": str(path),
                        "kernel": name,
                        "device": entry.get("device", {}),
                        "key": entry.get("key", {}),
                        "config": entry["config"],
                    }
                )
    return rows


def tables_in(directories: Sequence[Path]) -> list[Path]:
    """The shipped tables (``*.autotune.json``) under each package directory."""
    found: list[Path] = []
    for directory in directories:
        with contextlib.suppress(OSError):
            found.extend(directory.rglob(f"*{SHIPPED_SUFFIX}"))
    return found


class KernelCacheTables:
    """The tables an autotuned launch consults (:mod:`._autotuning`): the winners learned in the
    process's kernel cache (none when it is off) and the kernel's shipped table."""

    def device(self, js: Any) -> dict[str, str]:
        return device_key(js.target, js.runtime.device_info)

    def learned(self, tuned: Any, device: dict[str, str], values: dict[str, str]) -> Any:
        cache = active_kernel_cache()
        if cache is None:
            return None
        meta = read_learned(cache, learned_key(tuned.identity, device, values))
        return None if meta is None else meta.get("config")

    def shipped(self, tuned: Any, device: dict[str, str], values: dict[str, str]) -> Any:
        if tuned.table is None:
            return None
        SHIPPED_SEEN.add(tuned.table)
        entry = match_entry(load_shipped(tuned.table).get(tuned.name, []), device, values)
        return None if entry is None else entry["config"]

    def keep(
        self,
        tuned: Any,
        device: dict[str, str],
        values: dict[str, str],
        config: dict[str, Any],
        timings: tuple[float | None, ...],
    ) -> Any:
        cache = active_kernel_cache()
        if cache is None:
            return config
        meta = {
            "autotune": TABLE_FORMAT,
            "kernel": f"{tuned.identity['file']}:{tuned.name}",
            "device": device,
            "key": values,
            "config": config,
            "timings": list(timings),
        }
        kkey = learned_key(tuned.identity, device, values)
        return store_learned(cache, kkey, meta).get("config")


#: The tables every JIT session hands its autotuned kernels.
TABLES = KernelCacheTables()

__all__ = [
    "KIND",
    "SHIPPED_SEEN",
    "SHIPPED_SUFFIX",
    "TABLES",
    "TABLE_FORMAT",
    "KernelCacheTables",
    "device_key",
    "learned_key",
    "learned_tables",
    "load_shipped",
    "match_entry",
    "read_learned",
    "shipped_tables",
    "store_learned",
    "tables_in",
]

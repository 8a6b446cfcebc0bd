"""The persistent kernel cache: compile each kernel once per machine, not once per process.

Backends key a compiled artifact (a CUBIN or PTX with its log and names) on every input that
decides its bytes (:class:`KernelKey`) and ask :meth:`KernelCache.load_or_build`. The cache is one
directory shared by every process of the user:

* ``entries/ab/<digest>``: one file per key, written to ``tmp/`` and moved in with
  ``os.replace``, so a reader sees a whole entry or none; a SHA-256 over the body rejects a
  corrupt or truncated one, which is deleted and rebuilt, never loaded.
* the entry's mtime is its recency stamp, set explicitly (``os.utime``, in ns) on write and every
  hit; eviction drops the oldest stamps first until the entries fit ``max_bytes``.
* ``locks/``: ``fcntl.flock`` on open files. A builder holds its key's shard lock while it
  compiles, so two processes wanting one kernel compile it once; the kernel drops a lock with
  its holder, so a killed process leaves no lock behind. A writer also locks its temp file, which
  tells a sweeper a dead writer's leftovers from a live write.
* ``names/``: the key parts last stored under each source name, to say *which* part changed.
* ``stats.json``: hits, misses and evictions of every process (hits are written at exit).

A cache directory that cannot be read or written never fails a compile: the cache warns once
(:class:`KernelCacheWarning`) and the kernel is compiled without it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import re
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import ValidationError

try:
    import fcntl
except ImportError:  # not POSIX: no flock, so no cache (active_kernel_cache() answers None)
    fcntl = None  # type: ignore[assignment]

ENV_DIR = "TENFERRO_CACHE_DIR"
ENV_MAX_BYTES = "TENFERRO_CACHE_MAX_BYTES"
ENV_SWITCH = "TENFERRO_CACHE"
DEFAULT_MAX_BYTES = 1 << 30
OFF = ("off", "0", "false", "no")
#: Bumped when the entry format or a key's meaning changes: old entries then simply miss.
FORMAT = 1

_MAGIC = b"TFKC\x00\x01"
_HEADER = struct.Struct("<6s32sQQ")  # magic, sha256(body), len(meta), len(payload)
_SIZE = re.compile(r"^(\d+)\s*([KMGT]?)(?:I?B)?$")
_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_DEAD_TMP_AGE_S = 60.0

LOGGER = "tenferro_host.kernel_cache"


def _debug(message: str, *args: Any) -> None:
    """A debug line on the ``tenferro_host.kernel_cache`` logger. Only a process that imported
    ``logging`` can have configured a handler, so the module is not imported for it."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(LOGGER).debug(message, *args)


def _debugging() -> bool:
    logging = sys.modules.get("logging")
    return logging is not None and logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)


class KernelCacheWarning(UserWarning):
    """The kernel cache cannot be used (directory unwritable, full, misconfigured); compiling
    goes on without it. Issued once per cache."""


class _Frozen:
    """Immutable after ``__init__`` (a hand-written frozen dataclass: building the two
    dataclasses cost ~1 ms of the first persistent hit of a process, which imports this module)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


class KernelKey(_Frozen):
    """Everything that decides a compiled artifact's bytes, as named parts (short strings).

    ``kind`` names the compiler (``"nvrtc"``); ``name`` the source's name, used only to
    explain a miss (which parts differ from the entry last stored under that name).
    """

    __slots__ = ("digest", "kind", "name", "parts")
    kind: str
    name: str
    parts: Mapping[str, str]
    digest: str

    def __init__(self, kind: str, name: str, parts: Mapping[str, str]) -> None:
        text = json.dumps([FORMAT, kind, sorted(parts.items())], separators=(",", ":"))
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "digest", hashlib.sha256(text.encode()).hexdigest())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, KernelKey)
        return (self.kind, self.name, self.parts) == (other.kind, other.name, other.parts)

    def __hash__(self) -> int:
        return hash((self.kind, self.name, self.digest))

    def __repr__(self) -> str:
        return f"KernelKey(kind={self.kind!r}, name={self.name!r}, parts={self.parts!r})"


class CachedKernel(_Frozen):
    """A compiled artifact: the binary ``payload`` and JSON-able ``meta`` (log, names, ...)."""

    __slots__ = ("meta", "payload")
    payload: bytes
    meta: Mapping[str, Any]

    def __init__(self, payload: bytes, meta: Mapping[str, Any]) -> None:
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "meta", meta)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, CachedKernel)
        return (self.payload, self.meta) == (other.payload, other.meta)

    __hash__ = None  # type: ignore[assignment]  # meta is a dict, as with the dataclass

    def __repr__(self) -> str:
        return f"CachedKernel(payload={self.payload!r}, meta={self.meta!r})"


class _Unusable(Exception):  # noqa: N818 - a control-flow signal, caught in this module
    """An entry that must not be loaded; the message says why."""


def encode_entry(key: KernelKey, kernel: CachedKernel) -> bytes:
    """The on-disk form of an entry: header, JSON metadata, payload."""
    meta = json.dumps(
        {
            "key": key.digest,
            "kind": key.kind,
            "name": key.name,
            "parts": dict(key.parts),
            "meta": dict(kernel.meta),
        }
    ).encode()
    body = meta + kernel.payload
    header = _HEADER.pack(_MAGIC, hashlib.sha256(body).digest(), len(meta), len(kernel.payload))
    return header + body


def decode_entry(data: bytes, digest: str) -> CachedKernel:
    """The entry in ``data`` if it is whole and belongs to ``digest``; else :class:`_Unusable`."""
    if len(data) < _HEADER.size:
        raise _Unusable(f"truncated entry ({len(data)} bytes, shorter than its header)")
    magic, checksum, n_meta, n_payload = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise _Unusable("not an entry of this cache format")
    body = data[_HEADER.size :]
    if len(body) != n_meta + n_payload:
        raise _Unusable(f"truncated entry ({len(body)} of {n_meta + n_payload} body bytes)")
    if hashlib.sha256(body).digest() != checksum:
        raise _Unusable("checksum mismatch")
    try:
        meta = json.loads(body[:n_meta])
    except ValueError as exc:
        raise _Unusable(f"unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("key") != digest:
        raise _Unusable("entry stored under another key")
    if not isinstance(meta.get("meta"), dict):
        raise _Unusable("metadata without the compiler's fields")
    return CachedKernel(bytes(body[n_meta:]), meta["meta"])


def parse_size(text: str) -> int:
    """Bytes from ``"1073741824"``, ``"512M"``, ``"2GiB"``; ValidationError when not a size."""
    found = _SIZE.match(text.strip().upper())
    value = int(found.group(1)) * _SUFFIXES[found.group(2)] if found else 0
    if value <= 0:
        raise ValidationError(
            f"{ENV_MAX_BYTES}={text!r} is not a positive size (bytes, or with K/M/G: '512M')",
            argument=ENV_MAX_BYTES,
        )
    return value


def default_dir() -> Path:
    """``$TENFERRO_CACHE_DIR``, else ``$XDG_CACHE_HOME/tenferro-host/kernels``."""
    explicit = os.environ.get(ENV_DIR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tenferro-host" / "kernels"


class KernelCache:
    """One cache directory bounded by ``max_bytes`` (see the module docstring)."""

    def __init__(self, root: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ValidationError(
                f"max_bytes must be a positive int, got {max_bytes!r}", argument="max_bytes"
            )
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.hits = self.misses = self.evictions = 0
        self._unsaved_hits = 0
        self._warned = False
        self._writable = True
        self._lock = threading.Lock()
        self._atexit = False

    # -- the one call backends make -------------------------------------------------------------
    def load_or_build(self, key: KernelKey, build: Callable[[], CachedKernel]) -> CachedKernel:
        """The entry for ``key``, else ``build()``'s result, stored for every later process.

        ``build`` runs at most once per key across processes at a time; its exceptions (a
        compile error) propagate and nothing is stored.
        """
        found, why = self._read(key)
        if found is not None:
            self._hit(key)
            return found
        if not self._writable:
            return self._miss(key, why, build)
        try:
            shard = _acquire(self.root / "locks" / key.digest[:2])
        except OSError as exc:
            self._degrade(exc, "lock")
            return self._miss(key, why, build)
        try:
            found, again = self._read(key, discard=True)  # built by another process meanwhile?
            if found is not None:
                self._hit(key)
                return found
            kernel = self._miss(key, why or again, build)
            self._store(key, kernel)
        finally:
            os.close(shard)  # closing drops the lock; so does the holder's death
        return kernel

    # -- reading --------------------------------------------------------------------------------
    def _path(self, digest: str) -> Path:
        return self.root / "entries" / digest[:2] / digest

    def _read(
        self, key: KernelKey, discard: bool = False
    ) -> tuple[CachedKernel | None, str | None]:
        """(entry, None) on a hit; (None, why-not) otherwise. ``discard`` (under the key's shard
        lock, so no writer is replacing it) deletes a bad entry."""
        path = self._path(key.digest)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, f"entry unreadable ({exc.strerror or exc})"
        try:
            found = decode_entry(data, key.digest)
        except _Unusable as exc:
            if discard:
                with contextlib.suppress(OSError):
                    path.unlink()
            return None, f"corrupt entry ({exc}){', discarded' if discard else ''}"
        with contextlib.suppress(OSError):
            os.utime(path, ns=_stamp())
        return found, None

    def _hit(self, key: KernelKey) -> None:
        with self._lock:
            self.hits += 1
            self._unsaved_hits += 1
            if not self._atexit:
                self._atexit = True
                atexit.register(self.save_stats)
        _debug("loaded %s %s from the cache (%s)", key.kind, key.name, key.digest[:12])

    def _miss(
        self, key: KernelKey, why: str | None, build: Callable[[], CachedKernel]
    ) -> CachedKernel:
        with self._lock:
            self.misses += 1
        if _debugging():
            _debug(
                "compiling %s %s instead of loading it: %s",
                key.kind,
                key.name,
                why or self._explain(key),
            )
        return build()

    def _explain(self, key: KernelKey) -> str:
        """Why a key has no entry: new, or which parts differ from the last one of that name."""
        try:
            last = json.loads((self.root / "names" / _name_id(key)).read_text())
            before = dict(last["parts"])
        except (OSError, ValueError, KeyError, TypeError):
            return "new key"
        changed = sorted(p for p in {*before, *key.parts} if before.get(p) != key.parts.get(p))
        if not changed:
            return "the entry of the same key was evicted or cleared"
        return f"{', '.join(changed)} changed since the entry last stored under this name"

    # -- writing --------------------------------------------------------------------------------
    def _store(self, key: KernelKey, kernel: CachedKernel) -> None:
        data = encode_entry(key, kernel)
        if len(data) > self.max_bytes:
            _debug(
                "not caching %s %s: %d bytes exceed the bound of %d",
                key.kind,
                key.name,
                len(data),
                self.max_bytes,
            )
            return
        try:
            self._write_atomic(self._path(key.digest), data)
            self._write_atomic(
                self.root / "names" / _name_id(key),
                json.dumps({"kind": key.kind, "name": key.name, "parts": dict(key.parts)}).encode(),
            )
            with self._flock(self.root / "locks" / "index"):
                self._update_stats(misses=1, evictions=self._enforce_bound())
        except OSError as exc:
            self._degrade(exc, "write")

    def _write_atomic(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` through a locked temp file and ``os.replace``."""
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = tmp_dir / f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # live write: sweepers leave it alone
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.utime(fd, ns=_stamp())
            try:
                os.replace(tmp, path)
            except FileNotFoundError:  # swept by a prune in the instant before our lock
                _debug("temp file of %s vanished before its rename; not cached", path.name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _flock(self, path: Path) -> Iterator[None]:
        fd = _acquire(path)
        try:
            yield
        finally:
            os.close(fd)

    def _degrade(self, exc: OSError, what: str) -> None:
        """Stop writing; warn once. Compiling goes on without the cache."""
        self._writable = False
        reason = (
            "the disk is full"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
            else exc.strerror or str(exc)
        )
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"the kernel cache at {self.root} cannot be used ({what}: {reason}); kernels are "
                f"compiled without it. Point {ENV_DIR} at a writable directory or set "
                f"{ENV_SWITCH}=off",
                KernelCacheWarning,
                stacklevel=4,
            )

    # -- bound, stats, maintenance --------------------------------------------------------------
    def _entries(self) -> list[tuple[int, int, Path]]:
        """(recency stamp ns, size, path) of every entry file."""
        out = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.root / "entries") as shards:
            for shard in shards:
                if not shard.is_dir(follow_symlinks=False):
                    continue
                with contextlib.suppress(FileNotFoundError), os.scandir(shard.path) as files:
                    for f in files:
                        with contextlib.suppress(FileNotFoundError):
                            st = f.stat(follow_symlinks=False)
                            out.append((st.st_mtime_ns, st.st_size, Path(f.path)))
        return out

    def _enforce_bound(self) -> int:
        """Evict the least recently used entries until the rest fit; the count evicted."""
        self._sweep_tmp(_DEAD_TMP_AGE_S)
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        evicted = 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                evicted += 1
            total -= size
        with self._lock:
            self.evictions += evicted
        if evicted:
            _debug(
                "evicted %d kernel cache entries to stay within %d bytes", evicted, self.max_bytes
            )
        return evicted

    def _sweep_tmp(self, min_age_s: float) -> int:
        """Delete temp files no live writer holds (a writer killed mid-write leaves one)."""
        swept = 0
        cutoff = time.time() - min_age_s
        with contextlib.suppress(FileNotFoundError), os.scandir(self.root / "tmp") as files:
            for f in files:
                try:
                    if f.stat(follow_symlinks=False).st_mtime > cutoff:
                        continue
                    fd = os.open(f.path, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os.unlink(f.path)
                    swept += 1
                except OSError:
                    pass  # held by a live writer, or already gone
                finally:
                    os.close(fd)
        return swept

    def _update_stats(self, **add: int) -> None:
        """Add to the shared counters (the caller holds the index lock)."""
        path = self.root / "stats.json"
        counts = self._saved_stats()
        for name, n in add.items():
            counts[name] = counts.get(name, 0) + n
        self._write_atomic(path, json.dumps(counts).encode())

    def _saved_stats(self) -> dict[str, int]:
        try:
            found = json.loads((self.root / "stats.json").read_text())
        except (OSError, ValueError):
            return {"hits": 0, "misses": 0, "evictions": 0}
        if not isinstance(found, dict):
            return {"hits": 0, "misses": 0, "evictions": 0}
        return {
            k: int(found.get(k, 0))
            for k in ("hits", "misses", "evictions")
            if isinstance(found.get(k, 0), int)
        }

    def save_stats(self) -> None:
        """Add this process's unsaved hits to the shared counters (also run at exit)."""
        with self._lock:
            hits, self._unsaved_hits = self._unsaved_hits, 0
        if not hits or not self._writable or not self.root.is_dir():
            return
        try:
            with self._flock(self.root / "locks" / "index"):
                self._update_stats(hits=hits)
        except OSError as exc:
            _debug("kernel cache hits not saved: %s", exc)

    def stats(self) -> dict[str, Any]:
        """Entries, bytes, the shared hit/miss/eviction counts and the oldest recency stamp."""
        self.save_stats()
        entries = self._entries()
        oldest = min((stamp for stamp, _, _ in entries), default=None)
        return {
            "path": str(self.root),
            "entries": len(entries),
            "bytes": sum(size for _, size, _ in entries),
            "max_bytes": self.max_bytes,
            **{k: 0 for k in ("hits", "misses", "evictions")},
            **self._saved_stats(),
            "oldest": None
            if oldest is None
            else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(oldest / 1e9)),
        }

    def prune(self) -> dict[str, int]:
        """Drop corrupt entries, dead writers' temp files and what exceeds the bound."""
        corrupt = 0
        with self._flock(self.root / "locks" / "index"):
            for _, _, path in self._entries():
                try:
                    decode_entry(path.read_bytes(), path.name)
                except _Unusable:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        corrupt += 1
                except FileNotFoundError:
                    continue
            temps = self._sweep_tmp(0.0)
            evicted = self._enforce_bound()
            self._update_stats(evictions=evicted)
        return {"corrupt": corrupt, "temp_files": temps, "evicted": evicted}

    def clear(self) -> int:
        """Remove every entry and the counters; the number of entries removed."""
        removed = 0
        with self._flock(self.root / "locks" / "index"):
            for _, _, path in self._entries():
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
            with contextlib.suppress(FileNotFoundError), os.scandir(self.root / "names") as it:
                for f in it:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f.path)
            self._sweep_tmp(0.0)
            with contextlib.suppress(FileNotFoundError):
                (self.root / "stats.json").unlink()
        with self._lock:
            self._unsaved_hits = 0
        return removed


def _stamp() -> tuple[int, int]:
    """(atime, mtime) for a recency stamp: the clock in ns. ``os.utime`` without times would
    take the kernel's coarse file clock (a jiffy), tying entries used milliseconds apart."""
    now = time.time_ns()
    return now, now


def _acquire(path: Path) -> int:
    """An open descriptor of the lock file ``path``, exclusively flocked (waits for a holder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _name_id(key: KernelKey) -> str:
    return hashlib.sha256(f"{key.kind}\0{key.name}".encode()).hexdigest()[:32]


_caches: dict[tuple[Path, int], KernelCache] = {}
_config_warned: set[str] = set()


def active_kernel_cache() -> KernelCache | None:
    """The process's cache for the current environment, or None when ``TENFERRO_CACHE=off`` (or
    on a platform without ``fcntl.flock``).

    A wrong setting warns once and turns the cache off: it never fails a compile.
    """
    switch = os.environ.get(ENV_SWITCH, "").strip().lower()
    if switch in OFF or fcntl is None:
        return None
    try:
        if switch not in ("", "on", "1", "true", "yes"):
            raise ValidationError(
                f"{ENV_SWITCH}={switch!r} is not 'on' or 'off'", argument=ENV_SWITCH
            )
        text = os.environ.get(ENV_MAX_BYTES, "").strip()
        max_bytes = parse_size(text) if text else DEFAULT_MAX_BYTES
    except ValidationError as exc:
        if exc.message not in _config_warned:
            _config_warned.add(exc.message)
            warnings.warn(
                f"{exc.message}; kernels are compiled without the cache",
                KernelCacheWarning,
                stacklevel=3,
            )
        return None
    where = (default_dir(), max_bytes)
    found = _caches.get(where)
    if found is None:
        found = _caches[where] = KernelCache(*where)
    return found


__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENV_DIR",
    "ENV_MAX_BYTES",
    "ENV_SWITCH",
    "OFF",
    "CachedKernel",
    "KernelCache",
    "KernelCacheWarning",
    "KernelKey",
    "active_kernel_cache",
    "decode_entry",
    "default_dir",
    "encode_entry",
    "parse_size",
]

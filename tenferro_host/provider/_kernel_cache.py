"""The persistent kernel cache: compile each kernel once per machine, not once per process.

Backends key a compiled artifact (a CUBIN or PTX with its log and names) on every input that
decides its bytes (:class:`KernelKey`) and ask :meth:`KernelCache.load_or_build`. The cache is one
private directory shared by every process of the user (:mod:`._cache_dir` says which directory
is trusted):

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

A cache directory that cannot be read or written, or that is not private, never fails a
compile: the cache warns once (:class:`KernelCacheWarning`) and the kernel is compiled without it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ._cache_dir import (
    UntrustedDirectory,
    check_dir,
    check_tree,
    make_private_dir,
    read_private,
    remove,
    verdict,
)
from ._cache_entry import CachedKernel, KernelKey, UnusableEntry, decode_entry, encode_entry
from ._cache_settings import (
    DEFAULT_MAX_BYTES,
    ENV_DIR,
    ENV_MAX_BYTES,
    ENV_SWITCH,
    OFF,
    default_dir,
    max_bytes,
    parse_size,
    switched_on,
)

try:
    import fcntl
except ImportError:  # not POSIX: no flock, so no cache (active_kernel_cache() answers None)
    fcntl = None  # type: ignore[assignment]

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
    """The kernel cache cannot be used (directory unwritable, full, not private,
    misconfigured) or held an entry its backend rejected; compiling goes on without it."""


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
        self._checked: set[Path] = set()  # directories found private (or made so) by this process
        self._refused: UntrustedDirectory | None = None
        self._lock = threading.Lock()
        self._atexit = False

    # -- the one call backends make -------------------------------------------------------------
    def load_or_build(self, key: KernelKey, build: Callable[[], CachedKernel]) -> CachedKernel:
        """The entry for ``key``, else ``build()``'s result, stored for every later process.

        ``build`` runs at most once per key across processes at a time; its exceptions (a
        compile error) propagate and nothing is stored.
        """
        if not self._usable():
            return self._miss(key, "the cache directory is not used", build)
        found, why = self._read(key)
        if found is not None:
            self._hit(key)
            return found
        if not self._writable or self._refused is not None:
            return self._miss(key, why, build)
        try:
            shard = _acquire(self._dir(self.root / "locks") / key.digest[:2])
        except (OSError, UntrustedDirectory) as exc:
            self._give_up(exc, "lock")
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

    def reject(self, key: KernelKey, kernel: CachedKernel, reason: str) -> None:
        """Drop the entry ``kernel`` of ``key``, which its backend could not use (a WGSL the
        adapter refuses, metadata that is not an image's: an older build's, a hand edit), with a
        warning; the next :meth:`load_or_build` builds it again. An entry another process
        replaced meanwhile stays."""
        warnings.warn(
            f"the kernel cache entry of {key.kind} {key.name} ({key.digest[:12]}) in {self.root} "
            f"passed its checksum but was rejected ({reason}); it is discarded and the kernel "
            "built again",
            KernelCacheWarning,
            stacklevel=2,
        )
        try:
            shard = _acquire(self._dir(self.root / "locks") / key.digest[:2])
        except (OSError, UntrustedDirectory) as exc:
            self._give_up(exc, "lock")
            return
        try:
            found, _ = self._read(key)
            if found == kernel:
                remove(self._path(key.digest))
        except OSError as exc:
            self._give_up(exc, "write")
        finally:
            os.close(shard)

    # -- trust ----------------------------------------------------------------------------------
    def verdict(self) -> str:
        """``trusted``, or ``refused: <directory> <why>. Fix: <what to do>``."""
        return verdict(self.root)

    def _usable(self) -> bool:
        """Whether this process may read the cache: its root and directories are private (checked
        at the first call; the entry shards as they are touched)."""
        if self._refused is not None:
            return False
        try:
            self._dir(self.root)
        except UntrustedDirectory as exc:
            self._refuse(exc)
            return False
        except OSError as exc:
            self._degrade(exc, "open")
            return False
        return True

    def _dir(self, path: Path) -> Path:
        """``path`` (the root or a directory in it), created 0700 with those above it in the
        cache when missing, and found private."""
        if path not in self._checked:
            if path == self.root:
                check_tree(self.root, create=True, shards=False)
            else:
                self._dir(path.parent)
                make_private_dir(path)
                check_dir(path)
            self._checked.add(path)
        return path

    def _refuse(self, exc: UntrustedDirectory) -> None:
        """Use the cache no more in this process; warn once, naming the directory and the fix."""
        self._refused = exc
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"the kernel cache is not used: {exc}, so another user could plant the code "
                f"this process runs; kernels are compiled without it. Fix: {exc.fix}; or set "
                f"{ENV_SWITCH}=off",
                KernelCacheWarning,
                stacklevel=4,
            )

    def _give_up(self, exc: OSError | UntrustedDirectory, what: str) -> None:
        if isinstance(exc, UntrustedDirectory):
            self._refuse(exc)
        else:
            self._degrade(exc, what)

    # -- reading --------------------------------------------------------------------------------
    def _path(self, digest: str) -> Path:
        return self.root / "entries" / digest[:2] / digest

    def _read(
        self, key: KernelKey, discard: bool = False
    ) -> tuple[CachedKernel | None, str | None]:
        """(entry, None) on a hit; (None, why-not) otherwise. ``discard`` (under the key's shard
        lock, so no writer is replacing it) deletes a bad entry."""
        path = self._path(key.digest)
        if path.parent not in self._checked:
            try:
                check_dir(path.parent)
            except FileNotFoundError:
                return None, None
            except UntrustedDirectory as exc:
                self._refuse(exc)
                return None, "the cache directory is not used"
            except OSError as exc:
                return None, f"entry unreadable ({exc.strerror or exc})"
            self._checked.add(path.parent)
        try:
            found = decode_entry(read_private(path), key.digest)
        except FileNotFoundError:
            return None, None
        except UnusableEntry as exc:
            if discard:
                with contextlib.suppress(OSError):
                    remove(path)
            return None, f"corrupt entry ({exc}){', discarded' if discard else ''}"
        with contextlib.suppress(OSError):
            os.utime(path, ns=_stamp(), follow_symlinks=False)
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
            last = json.loads(read_private(self.root / "names" / _name_id(key)))
            before = dict(last["parts"])
        except (OSError, UnusableEntry, ValueError, KeyError, TypeError):
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
        except (OSError, UntrustedDirectory) as exc:
            self._give_up(exc, "write")

    def _write_atomic(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` through a locked private temp file and ``os.replace``."""
        tmp_dir = self._dir(self.root / "tmp")
        self._dir(path.parent)
        if os.path.isdir(path) and not os.path.islink(path):
            remove(path)  # a stray directory where the entry belongs
        tmp = tmp_dir / f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask: readable by its owner alone
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
        fd = _acquire(self._dir(path.parent) / path.name)
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
    def _scan(self) -> tuple[list[tuple[int, int, Path]], list[Path]]:
        """(recency stamp ns, size, path) of every entry file, and what else is in ``entries/``
        (a stray directory, a link, a file where a shard belongs)."""
        out, strays = [], []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.root / "entries") as shards:
            for shard in shards:
                if not shard.is_dir(follow_symlinks=False):
                    strays.append(Path(shard.path))
                    continue
                with contextlib.suppress(FileNotFoundError), os.scandir(shard.path) as files:
                    for f in files:
                        with contextlib.suppress(FileNotFoundError):
                            if not f.is_file(follow_symlinks=False):
                                strays.append(Path(f.path))
                                continue
                            st = f.stat(follow_symlinks=False)
                            out.append((st.st_mtime_ns, st.st_size, Path(f.path)))
        return out, strays

    def _enforce_bound(self) -> int:
        """Evict the least recently used entries until the rest fit; the count evicted."""
        self._sweep_tmp(_DEAD_TMP_AGE_S)
        entries = self._scan()[0]
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
                    fd = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
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
            found = json.loads(read_private(self.root / "stats.json"))
        except (OSError, UnusableEntry, ValueError):
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
        if not hits or not self._writable or self._refused or not self.root.is_dir():
            return
        try:
            with self._flock(self.root / "locks" / "index"):
                self._update_stats(hits=hits)
        except (OSError, UntrustedDirectory) as exc:
            _debug("kernel cache hits not saved: %s", exc)

    def stats(self) -> dict[str, Any]:
        """Entries, bytes, the shared hit/miss/eviction counts, the oldest recency stamp and the
        directory's verdict (``trusted`` or why it is refused)."""
        verdict = self.verdict()
        if verdict.startswith("trusted"):
            self.save_stats()
        entries = self._scan()[0]
        oldest = min((stamp for stamp, _, _ in entries), default=None)
        return {
            "path": str(self.root),
            "trust": verdict,
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
        """Drop corrupt entries and whatever else is not an entry, dead writers' temp files and
        what exceeds the bound. Refused (ValidationError) on a directory that is not private:
        its valid entries are not to be kept, so :meth:`clear` is what it needs."""
        try:
            check_tree(self.root, create=False)
        except UntrustedDirectory as exc:
            raise ValidationError(
                f"`cache prune` keeps valid entries, and the kernel cache is not private: {exc}; "
                f"run `tenferro-host cache clear`, then {exc.fix.split(' and then ')[0]}",
                argument=ENV_DIR,
            ) from None
        corrupt = 0
        with self._flock(self.root / "locks" / "index"):
            entries, strays = self._scan()
            for _, _, path in entries:
                try:
                    decode_entry(read_private(path), path.name)
                except UnusableEntry:
                    corrupt += remove(path)
                except FileNotFoundError:
                    continue
            corrupt += sum(remove(path) for path in strays)
            temps = self._sweep_tmp(0.0)
            evicted = self._enforce_bound()
            self._update_stats(evictions=evicted)
        return {"corrupt": corrupt, "temp_files": temps, "evicted": evicted}

    def clear(self) -> int:
        """Remove every entry (and whatever else is in ``entries/``) and the counters; the number
        of entries removed. Allowed on a directory that is not private: removing runs nothing."""
        refused = self.verdict().startswith("refused")  # no writer of ours to wait for
        with contextlib.nullcontext() if refused else self._flock(self.root / "locks" / "index"):
            entries, strays = self._scan()
            removed = sum(remove(path) for _, _, path in entries)
            for path in strays:
                remove(path)
            with contextlib.suppress(FileNotFoundError), os.scandir(self.root / "names") as it:
                for f in it:
                    remove(f.path)
            self._sweep_tmp(0.0)
            remove(self.root / "stats.json")
        with self._lock:
            self._unsaved_hits = 0
        return removed


def _stamp() -> tuple[int, int]:
    """(atime, mtime) for a recency stamp: the clock in ns. ``os.utime`` without times would
    take the kernel's coarse file clock (a jiffy), tying entries used milliseconds apart."""
    now = time.time_ns()
    return now, now


def _acquire(path: Path) -> int:
    """An open descriptor of the lock file ``path`` (its directory exists), exclusively flocked
    (waits for a holder)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        with contextlib.suppress(OSError):  # a umask like 0277 leaves it unopenable for writing
            os.fchmod(fd, 0o600)
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
    if fcntl is None:
        return None
    try:
        if not switched_on():
            return None
        bound = max_bytes()
    except ValidationError as exc:
        if exc.message not in _config_warned:
            _config_warned.add(exc.message)
            warnings.warn(
                f"{exc.message}; kernels are compiled without the cache",
                KernelCacheWarning,
                stacklevel=3,
            )
        return None
    where = (default_dir(), bound)
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

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
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
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
from ._cache_entry import (
    CachedKernel,
    KernelKey,
    UnusableEntry,
    decode_entry,
    encode_entry,
    stamp,
)
from ._cache_log import LOGGER, KernelCacheWarning, debug, debugging
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


def _writer() -> ModuleType:
    """The writing half (:mod:`._kernel_cache_store`: store, stats, maintenance), imported on
    first use: a process whose kernels all hit never compiles it (the first-hit import budget)."""
    from . import _kernel_cache_store

    return _kernel_cache_store


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
        return _writer().build_and_store(self, key, why, build)

    def reject(self, key: KernelKey, kernel: CachedKernel, reason: str) -> None:
        """Drop the entry ``kernel`` of ``key``, which its backend could not use (a WGSL the
        adapter refuses, metadata that is not an image's: an older build's, a hand edit), with a
        warning; the next :meth:`load_or_build` builds it again. An entry another process
        replaced meanwhile stays."""
        _writer().reject(self, key, kernel, reason)

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
            os.utime(path, ns=stamp(), follow_symlinks=False)
        return found, None

    def _hit(self, key: KernelKey) -> None:
        with self._lock:
            self.hits += 1
            self._unsaved_hits += 1
            if not self._atexit:
                self._atexit = True
                atexit.register(self.save_stats)
        debug("loaded %s %s from the cache (%s)", key.kind, key.name, key.digest[:12])

    def _miss(
        self, key: KernelKey, why: str | None, build: Callable[[], CachedKernel]
    ) -> CachedKernel:
        with self._lock:
            self.misses += 1
        if debugging():
            if not why:
                from ._kernel_cache_store import explain

                why = explain(self, key)
            debug("compiling %s %s instead of loading it: %s", key.kind, key.name, why)
        return build()

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

    # -- counters and maintenance (``tenferro-host cache``): in ._kernel_cache_store ------------
    def save_stats(self) -> None:
        """Add this process's unsaved hits to the shared counters (also run at exit)."""
        _writer().save_stats(self)

    def stats(self) -> dict[str, Any]:
        """Entries, bytes, the shared hit/miss/eviction counts, the oldest recency stamp and the
        directory's verdict (``trusted`` or why it is refused)."""
        return _writer().stats(self)

    def prune(self) -> dict[str, int]:
        """Drop corrupt entries and whatever else is not an entry, dead writers' temp files and
        what exceeds the bound (ValidationError on a directory that is not private)."""
        return _writer().prune(self)

    def clear(self) -> int:
        """Remove every entry (and whatever else is in ``entries/``) and the counters; the number
        of entries removed. Allowed on a directory that is not private: removing runs nothing."""
        return _writer().clear(self)


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
    "LOGGER",
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

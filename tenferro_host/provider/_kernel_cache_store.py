"""The kernel cache's writing and maintenance: storing a built entry under its shard lock,
the bound (eviction, dead writers' temp files), the shared counters, ``prune`` and ``clear``.

Apart from the reading half (:mod:`._kernel_cache`) so that a process whose compiles all hit
the cache never imports (nor, installed without bytecode, compiles) it; the layout and the rules
are the reading half's docstring.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ._cache_dir import UntrustedDirectory, check_tree, read_private, remove
from ._cache_entry import (
    CachedKernel,
    KernelKey,
    UnusableEntry,
    decode_entry,
    encode_entry,
    stamp,
)
from ._cache_log import KernelCacheWarning, debug
from ._cache_settings import ENV_DIR

if TYPE_CHECKING:
    from ._kernel_cache import KernelCache

_DEAD_TMP_AGE_S = 60.0


def build_and_store(
    cache: KernelCache, key: KernelKey, why: str | None, build: Callable[[], CachedKernel]
) -> CachedKernel:
    """``load_or_build`` after a miss: under the key's shard lock, the entry another process
    stored meanwhile, else ``build()``'s result, stored."""
    try:
        shard = acquire(cache._dir(cache.root / "locks") / key.digest[:2])
    except (OSError, UntrustedDirectory) as exc:
        cache._give_up(exc, "lock")
        return cache._miss(key, why, build)
    try:
        found, again = cache._read(key, discard=True)  # built by another process meanwhile?
        if found is not None:
            cache._hit(key)
            return found
        kernel = cache._miss(key, why or again, build)
        store(cache, key, kernel)
    finally:
        os.close(shard)  # closing drops the lock; so does the holder's death
    return kernel


def explain(cache: KernelCache, key: KernelKey) -> str:
    """Why a key has no entry: new, or which parts differ from the last one of that name."""
    try:
        last = json.loads(read_private(cache.root / "names" / name_id(key)))
        before = dict(last["parts"])
    except (OSError, UnusableEntry, ValueError, KeyError, TypeError):
        return "new key"
    changed = sorted(p for p in {*before, *key.parts} if before.get(p) != key.parts.get(p))
    if not changed:
        return "the entry of the same key was evicted or cleared"
    return f"{', '.join(changed)} changed since the entry last stored under this name"


def store(cache: KernelCache, key: KernelKey, kernel: CachedKernel) -> None:
    data = encode_entry(key, kernel)
    if len(data) > cache.max_bytes:
        debug(
            "not caching %s %s: %d bytes exceed the bound of %d",
            key.kind,
            key.name,
            len(data),
            cache.max_bytes,
        )
        return
    try:
        write_atomic(cache, cache._path(key.digest), data)
        write_atomic(
            cache,
            cache.root / "names" / name_id(key),
            json.dumps({"kind": key.kind, "name": key.name, "parts": dict(key.parts)}).encode(),
        )
        with flock(cache, cache.root / "locks" / "index"):
            update_stats(cache, misses=1, evictions=enforce_bound(cache))
    except (OSError, UntrustedDirectory) as exc:
        cache._give_up(exc, "write")


def write_atomic(cache: KernelCache, path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a locked private temp file and ``os.replace``."""
    tmp_dir = cache._dir(cache.root / "tmp")
    cache._dir(path.parent)
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
        os.utime(fd, ns=stamp())
        try:
            os.replace(tmp, path)
        except FileNotFoundError:  # swept by a prune in the instant before our lock
            debug("temp file of %s vanished before its rename; not cached", path.name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def flock(cache: KernelCache, path: Path) -> Iterator[None]:
    fd = acquire(cache._dir(path.parent) / path.name)
    try:
        yield
    finally:
        os.close(fd)


def scan(cache: KernelCache) -> tuple[list[tuple[int, int, Path]], list[Path]]:
    """(recency stamp ns, size, path) of every entry file, and what else is in ``entries/``
    (a stray directory, a link, a file where a shard belongs)."""
    out, strays = [], []
    with contextlib.suppress(FileNotFoundError), os.scandir(cache.root / "entries") as shards:
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


def enforce_bound(cache: KernelCache) -> int:
    """Evict the least recently used entries until the rest fit; the count evicted."""
    sweep_tmp(cache, _DEAD_TMP_AGE_S)
    entries = scan(cache)[0]
    total = sum(size for _, size, _ in entries)
    evicted = 0
    for _, size, path in sorted(entries):
        if total <= cache.max_bytes:
            break
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            evicted += 1
        total -= size
    with cache._lock:
        cache.evictions += evicted
    if evicted:
        debug("evicted %d kernel cache entries to stay within %d bytes", evicted, cache.max_bytes)
    return evicted


def sweep_tmp(cache: KernelCache, min_age_s: float) -> int:
    """Delete temp files no live writer holds (a writer killed mid-write leaves one)."""
    swept = 0
    cutoff = time.time() - min_age_s
    with contextlib.suppress(FileNotFoundError), os.scandir(cache.root / "tmp") as files:
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


def update_stats(cache: KernelCache, **add: int) -> None:
    """Add to the shared counters (the caller holds the index lock)."""
    path = cache.root / "stats.json"
    counts = saved_stats(cache)
    for name, n in add.items():
        counts[name] = counts.get(name, 0) + n
    write_atomic(cache, path, json.dumps(counts).encode())


def saved_stats(cache: KernelCache) -> dict[str, int]:
    try:
        found = json.loads(read_private(cache.root / "stats.json"))
    except (OSError, UnusableEntry, ValueError):
        return {"hits": 0, "misses": 0, "evictions": 0}
    if not isinstance(found, dict):
        return {"hits": 0, "misses": 0, "evictions": 0}
    return {
        k: int(found.get(k, 0))
        for k in ("hits", "misses", "evictions")
        if isinstance(found.get(k, 0), int)
    }


def save_stats(cache: KernelCache) -> None:
    """Add this process's unsaved hits to the shared counters (also run at exit)."""
    with cache._lock:
        hits, cache._unsaved_hits = cache._unsaved_hits, 0
    if not hits or not cache._writable or cache._refused or not cache.root.is_dir():
        return
    try:
        with flock(cache, cache.root / "locks" / "index"):
            update_stats(cache, hits=hits)
    except (OSError, UntrustedDirectory) as exc:
        debug("kernel cache hits not saved: %s", exc)


def stats(cache: KernelCache) -> dict[str, Any]:
    """Entries, bytes, the shared hit/miss/eviction counts, the oldest recency stamp and the
    directory's verdict (``trusted`` or why it is refused)."""
    verdict = cache.verdict()
    if verdict.startswith("trusted"):
        save_stats(cache)
    entries = scan(cache)[0]
    oldest = min((stamp for stamp, _, _ in entries), default=None)
    return {
        "path": str(cache.root),
        "trust": verdict,
        "entries": len(entries),
        "bytes": sum(size for _, size, _ in entries),
        "max_bytes": cache.max_bytes,
        **{k: 0 for k in ("hits", "misses", "evictions")},
        **saved_stats(cache),
        "oldest": None
        if oldest is None
        else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(oldest / 1e9)),
    }


def prune(cache: KernelCache) -> dict[str, int]:
    """Drop corrupt entries and whatever else is not an entry, dead writers' temp files and
    what exceeds the bound. Refused (ValidationError) on a directory that is not private:
    its valid entries are not to be kept, so :meth:`clear` is what it needs."""
    try:
        check_tree(cache.root, create=False)
    except UntrustedDirectory as exc:
        raise ValidationError(
            f"`cache prune` keeps valid entries, and the kernel cache is not private: {exc}; "
            f"run `tenferro-host cache clear`, then {exc.fix.split(' and then ')[0]}",
            argument=ENV_DIR,
        ) from None
    corrupt = 0
    with flock(cache, cache.root / "locks" / "index"):
        entries, strays = scan(cache)
        for _, _, path in entries:
            try:
                decode_entry(read_private(path), path.name)
            except UnusableEntry:
                corrupt += remove(path)
            except FileNotFoundError:
                continue
        corrupt += sum(remove(path) for path in strays)
        temps = sweep_tmp(cache, 0.0)
        evicted = enforce_bound(cache)
        update_stats(cache, evictions=evicted)
    return {"corrupt": corrupt, "temp_files": temps, "evicted": evicted}


def clear(cache: KernelCache) -> int:
    """Remove every entry (and whatever else is in ``entries/``) and the counters; the number
    of entries removed. Allowed on a directory that is not private: removing runs nothing."""
    refused = cache.verdict().startswith("refused")  # no writer of ours to wait for
    with contextlib.nullcontext() if refused else flock(cache, cache.root / "locks" / "index"):
        entries, strays = scan(cache)
        removed = sum(remove(path) for _, _, path in entries)
        for path in strays:
            remove(path)
        with contextlib.suppress(FileNotFoundError), os.scandir(cache.root / "names") as it:
            for f in it:
                remove(f.path)
        sweep_tmp(cache, 0.0)
        remove(cache.root / "stats.json")
    with cache._lock:
        cache._unsaved_hits = 0
    return removed


def reject(cache: KernelCache, key: KernelKey, kernel: CachedKernel, reason: str) -> None:
    """Drop the entry ``kernel`` of ``key``, which its backend could not use (a WGSL the
    adapter refuses, metadata that is not an image's: an older build's, a hand edit), with a
    warning; the next :meth:`load_or_build` builds it again. An entry another process
    replaced meanwhile stays."""
    warnings.warn(
        f"the kernel cache entry of {key.kind} {key.name} ({key.digest[:12]}) in {cache.root} "
        f"passed its checksum but was rejected ({reason}); it is discarded and the kernel "
        "built again",
        KernelCacheWarning,
        stacklevel=2,
    )
    try:
        shard = acquire(cache._dir(cache.root / "locks") / key.digest[:2])
    except (OSError, UntrustedDirectory) as exc:
        cache._give_up(exc, "lock")
        return
    try:
        found, _ = cache._read(key)
        if found == kernel:
            remove(cache._path(key.digest))
    except OSError as exc:
        cache._give_up(exc, "write")
    finally:
        os.close(shard)


def acquire(path: Path) -> int:
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


def name_id(key: KernelKey) -> str:
    return hashlib.sha256(f"{key.kind}\0{key.name}".encode()).hexdigest()[:32]

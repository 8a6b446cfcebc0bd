"""The kernel cache trusts only a private directory: the user's own, writable by no one else.

CI runs as root, which ignores permissions: a directory "of another user" is made with
``os.chown`` to a uid without an account, a shared one with ``chmod``.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cache_support

from tenferro_host.provider import CachedKernel, KernelCache, KernelCacheWarning, KernelKey
from tenferro_host.provider import _kernel_cache as kc

cache_dir = cache_support.cache_dir
OTHER_UID = 12345

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a directory to another uid (os.chown) needs root"
)


def key(source: str) -> KernelKey:
    return KernelKey("test", "k.cu", {"source": source})


def fresh(source: str) -> CachedKernel:
    return CachedKernel(b"fresh " + source.encode(), {})


def run(cache: KernelCache, sources: str) -> tuple[list[bytes], list[str]]:
    """Load or build one kernel per letter: the payloads and the cache warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [cache.load_or_build(key(s), lambda s=s: fresh(s)).payload for s in sources]
    return got, [str(w.message) for w in caught if issubclass(w.category, KernelCacheWarning)]


def plant(root: Path, source: str) -> Path:
    """An entry for ``source`` with a valid checksum and someone else's payload."""
    path = root / "entries" / key(source).digest[:2] / key(source).digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(kc.encode_entry(key(source), CachedKernel(b"planted", {})))
    path.chmod(0o600)
    return path


def tree(root: Path) -> Iterator[Path]:
    yield root
    yield from root.rglob("*")


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_directories_are_created_0700_and_entries_0600_whatever_the_umask(
    cache_dir: Path, umask: int
) -> None:
    old = os.umask(umask)
    try:
        got, warned = run(KernelCache(cache_dir), "ab")
    finally:
        os.umask(old)
    assert got == [b"fresh a", b"fresh b"] and warned == []
    modes = {
        p.relative_to(cache_dir.parent): stat.S_IMODE(p.lstat().st_mode) for p in tree(cache_dir)
    }
    dirs = {p: m for p, m in modes.items() if (cache_dir.parent / p).is_dir()}
    files = {p: m for p, m in modes.items() if p not in dirs}
    assert set(dirs.values()) == {0o700}, dirs
    assert len(files) >= 4 and set(files.values()) == {0o600}, files  # entries, names, stats, locks
    assert KernelCache(cache_dir).verdict() == "trusted"


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722, 0o1777])
def test_a_planted_entry_in_a_shared_directory_is_not_loaded(cache_dir: Path, mode: int) -> None:
    plant(cache_dir, "a")
    cache_dir.chmod(mode)
    cache = KernelCache(cache_dir)
    got, warned = run(cache, "abc")
    assert got == [b"fresh a", b"fresh b", b"fresh c"]  # compiled; the planted entry unused
    assert len(warned) == 1, warned
    assert f"{cache_dir} is writable by" in warned[0] and f"mode {mode & 0o7777:04o}" in warned[0]
    assert f"chmod 700 {cache_dir}" in warned[0] and "cache clear" in warned[0]
    assert (cache.hits, cache.misses) == (0, 3)
    assert not (cache_dir / "tmp").exists()  # nothing written into it
    assert cache.verdict().startswith(f"refused: {cache_dir} is writable by")


def test_the_same_planted_entry_in_a_private_directory_is_loaded(cache_dir: Path) -> None:
    """The control of the test above: its planted entry would be loaded if it were trusted."""
    cache_dir.mkdir(mode=0o700)
    plant(cache_dir, "a")
    assert run(KernelCache(cache_dir), "a") == ([b"planted"], [])


@needs_root
def test_a_directory_of_another_user_is_not_used(cache_dir: Path) -> None:
    plant(cache_dir, "a")
    cache_dir.chmod(0o700)
    os.chown(cache_dir, OTHER_UID, -1)
    got, warned = run(KernelCache(cache_dir), "ab")
    assert got == [b"fresh a", b"fresh b"] and len(warned) == 1
    assert f"{cache_dir} is owned by uid {OTHER_UID}" in warned[0] and "mode 0700" in warned[0]
    assert "chown" in warned[0] and kc.ENV_DIR in warned[0]


@needs_root
@pytest.mark.parametrize("inside", ["entries", "shard", "tmp", "locks"])
def test_a_directory_inside_the_root_of_another_user_or_shared_is_not_used(
    cache_dir: Path, inside: str
) -> None:
    entry = plant(cache_dir, "a")
    cache_dir.chmod(0o700)
    for d in (cache_dir / "entries", entry.parent):
        d.chmod(0o700)
    target = {"entries": cache_dir / "entries", "shard": entry.parent}.get(inside)
    if target is None:
        target = cache_dir / inside
        target.mkdir(mode=0o700)
    os.chown(target, OTHER_UID, -1)
    got, warned = run(KernelCache(cache_dir), "a")
    assert got == [b"fresh a"] and len(warned) == 1
    assert f"{target} is owned by uid {OTHER_UID}" in warned[0]
    target.chmod(0o777)
    os.chown(target, os.geteuid(), -1)
    got, warned = run(KernelCache(cache_dir), "a")
    assert got == [b"fresh a"] and len(warned) == 1 and f"{target} is writable by" in warned[0]


def test_an_entry_file_that_is_not_private_is_not_loaded(cache_dir: Path) -> None:
    KernelCache(cache_dir).load_or_build(key("a"), lambda: fresh("a"))
    entry = plant(cache_dir, "a")
    entry.chmod(0o666)
    cache = KernelCache(cache_dir)
    assert run(cache, "a") == ([b"fresh a"], [])  # discarded and rebuilt, as a corrupt entry
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert run(KernelCache(cache_dir), "a") == ([b"fresh a"], [])


def test_a_symlinked_root_is_checked_where_it_points(cache_dir: Path, tmp_path: Path) -> None:
    """``~/.cache/...`` linked to a scratch disk is common: the link is followed, its target
    checked."""
    real = tmp_path / "scratch"
    real.mkdir(mode=0o700)
    cache_dir.symlink_to(real)
    assert run(KernelCache(cache_dir), "a") == ([b"fresh a"], [])
    assert run(KernelCache(cache_dir), "a") == ([b"fresh a"], [])  # a hit of the stored entry
    assert KernelCache(cache_dir).stats()["entries"] == 1
    real.chmod(0o777)
    got, warned = run(KernelCache(cache_dir), "b")
    assert got == [b"fresh b"] and len(warned) == 1 and f"{real} is writable by" in warned[0]


def test_a_symlinked_directory_inside_the_root_is_not_followed(
    cache_dir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    plant(elsewhere, "a")
    cache_dir.mkdir(mode=0o700)
    (cache_dir / "entries").symlink_to(elsewhere / "entries")
    got, warned = run(KernelCache(cache_dir), "a")
    assert got == [b"fresh a"] and len(warned) == 1
    assert f"{cache_dir / 'entries'} is a symbolic link" in warned[0]


def test_a_symlinked_entry_is_not_followed_and_is_discarded(
    cache_dir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    target = plant(elsewhere, "a")
    KernelCache(cache_dir).load_or_build(key("b"), lambda: fresh("b"))  # the tree exists
    link = cache_dir / "entries" / key("a").digest[:2] / key("a").digest
    link.parent.mkdir(mode=0o700, exist_ok=True)
    link.symlink_to(target)
    assert run(KernelCache(cache_dir), "a") == ([b"fresh a"], [])
    assert link.is_file() and not link.is_symlink()  # replaced by the fresh entry
    assert target.read_bytes() == kc.encode_entry(key("a"), CachedKernel(b"planted", {}))


def test_a_fifo_where_an_entry_belongs_does_not_block(cache_dir: Path) -> None:
    KernelCache(cache_dir).load_or_build(key("b"), lambda: fresh("b"))
    fifo = cache_dir / "entries" / key("a").digest[:2] / key("a").digest
    fifo.parent.mkdir(mode=0o700, exist_ok=True)
    os.mkfifo(fifo, 0o600)
    assert run(KernelCache(cache_dir), "a") == ([b"fresh a"], [])
    assert fifo.is_file()


def test_a_refused_cache_can_be_cleared_but_not_pruned(cache_dir: Path) -> None:
    from tenferro_host.errors import ValidationError

    plant(cache_dir, "a")
    cache_dir.chmod(0o777)
    cache = KernelCache(cache_dir)
    with pytest.raises(ValidationError, match="cache clear"):
        cache.prune()
    assert cache.clear() == 1
    assert cache.stats()["entries"] == 0

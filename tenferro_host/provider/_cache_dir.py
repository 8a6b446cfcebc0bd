"""Which kernel cache directory this process trusts: its user's own, writable by no one else.

An entry with a valid checksum is code the process will run (a CUBIN, a WGSL); the checksum
proves the bytes are whole, not who wrote them. So, as ssh does for ``~/.ssh`` and pip for its
cache, the root and every directory in it must be owned by the process's effective user and
writable by neither group nor others; the cache creates them 0700 and its entries 0600, whatever
the umask. The root may be a symbolic link (the directory it resolves to is checked); inside the
root no link is followed: a link where a directory belongs refuses the cache, a link where an
entry belongs is a bad entry (opened with ``O_NOFOLLOW``), discarded like a corrupt one.

The directories are checked once per process (a shard when the process first touches it): only
a directory's owner can change its owner or mode, and only its owner can add to a private one,
so a check stays true for the life of the process.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ._cache_entry import UnusableEntry

_NOT_PRIVATE = stat.S_IWGRP | stat.S_IWOTH
SUBDIRS = ("entries", "locks", "tmp", "names")


class UntrustedDirectory(Exception):  # noqa: N818 - a verdict, caught by the cache
    """A cache directory this process must not use: ``reason`` says why, ``fix`` what to do."""

    def __init__(self, path: Path, reason: str, fix: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason, self.fix = path, reason, fix


def owner_name(uid: int) -> str:
    """``uid 1000 (alice)``, or ``uid 12345`` for a uid without an account."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_dir(path: Path, *, follow: bool = False, cache_env: str = "TENFERRO_CACHE_DIR") -> None:
    """Refuse (:class:`UntrustedDirectory`) a directory another user owns or could write;
    ``FileNotFoundError`` when it does not exist, ``NotADirectoryError`` when it is a file.
    ``follow``: the root may be a symbolic link; nothing inside it may."""
    if follow and os.path.islink(path):
        path = Path(os.path.realpath(path))  # named as what is checked
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedDirectory(
            path,
            "is a symbolic link; the cache follows no link inside its directory",
            f"remove the link (`rm {path}`)",
        )
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(20, "Not a directory", str(path))
    me = os.geteuid()
    mode = f"mode {stat.S_IMODE(st.st_mode):04o}"
    if st.st_uid != me:
        raise UntrustedDirectory(
            path,
            f"is owned by {owner_name(st.st_uid)} (not by this process's user, "
            f"{owner_name(me)}; {mode})",
            f"point {cache_env} at a directory of your own, or take this one over "
            f"(`chown -R {me} {path}` as root) and then run `tenferro-host cache clear`",
        )
    if st.st_mode & _NOT_PRIVATE:
        writers = ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others"))
        who = " and ".join(w for bit, w in writers if st.st_mode & bit)
        raise UntrustedDirectory(
            path,
            f"is writable by {who} ({mode}, owner {owner_name(st.st_uid)})",
            f"`chmod 700 {path}` and then `tenferro-host cache clear` (what others could "
            "write there is not to be trusted)",
        )


def make_private_dir(path: Path) -> None:
    """Create ``path`` 0700 (whatever the umask); an existing one is left as it is."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)  # the umask may have narrowed it below what the cache needs


def check_tree(root: Path, *, create: bool, shards: bool = True) -> None:
    """Check ``root`` and the cache's directories in it (the entry shards too with ``shards``);
    with ``create``, make a missing root first (0700; the directories above it as ``mkdir -p``)."""
    if create and not os.path.lexists(root):
        root.parent.mkdir(parents=True, exist_ok=True)
        make_private_dir(root)
    check_dir(root, follow=True)
    for name in SUBDIRS:
        with contextlib.suppress(FileNotFoundError):
            check_dir(root / name)
    if shards:
        with contextlib.suppress(FileNotFoundError), os.scandir(root / "entries") as it:
            for shard in it:
                if shard.is_dir(follow_symlinks=False) or shard.is_symlink():  # else a stray file
                    with contextlib.suppress(FileNotFoundError):
                        check_dir(Path(shard.path))


def verdict(root: Path) -> str:
    """``trusted``, or ``refused: <directory> <why>. Fix: <what to do>`` for the cache at
    ``root`` (every directory in it checked, nothing created)."""
    try:
        check_tree(root, create=False)
    except UntrustedDirectory as exc:
        return f"refused: {exc}. Fix: {exc.fix}"
    except FileNotFoundError:
        return "trusted (not created yet)"
    except OSError as exc:
        return f"unusable: {exc.strerror or exc}"
    return "trusted"


def read_private(path: Path) -> bytes:
    """The bytes of ``path`` (an entry, the counters): a private regular file, never through a
    link, never blocking on a FIFO.

    ``FileNotFoundError`` when there is none; :class:`UnusableEntry` for a link, a directory, a
    device or a file another user owns or could write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise UnusableEntry("a symbolic link, not an entry") from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise UnusableEntry(f"unreadable ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise UnusableEntry(f"{kind}, not an entry")
        if st.st_uid != os.geteuid() or st.st_mode & _NOT_PRIVATE:
            mode = stat.S_IMODE(st.st_mode)
            raise UnusableEntry(f"not private ({owner_name(st.st_uid)}, mode {mode:04o})")
        with open(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def remove(path: Path | str) -> bool:
    """Remove what is at ``path`` (a file, a link, or a stray directory with its contents, never
    following a link); whether something was removed."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError:  # EISDIR on Linux, EPERM on macOS
        if os.path.islink(path) or not os.path.isdir(path):
            raise
        import shutil  # not at import: a cache hit never removes a directory

        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(path)
    return True


__all__ = [
    "SUBDIRS",
    "UntrustedDirectory",
    "check_dir",
    "check_tree",
    "make_private_dir",
    "owner_name",
    "read_private",
    "remove",
    "verdict",
]

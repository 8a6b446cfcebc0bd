"""A kernel cache entry: its key, its contents, and its checksummed on-disk form.

A key is a SHA-256 over the named parts that decide an artifact's bytes; an entry on disk is a
header (magic, SHA-256 of the body, lengths), the JSON metadata and the payload. The checksum
guards against corruption and truncation, not against a writer: who may write the directory is
the directory checks' business (:mod:`._cache_dir`).
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from collections.abc import Mapping
from typing import Any

#: Bumped when the entry format or a key's meaning changes: old entries then simply miss.
FORMAT = 1

_MAGIC = b"TFKC\x00\x01"
_HEADER = struct.Struct("<6s32sQQ")  # magic, sha256(body), len(meta), len(payload)


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


class UnusableEntry(Exception):  # noqa: N818 - a control-flow signal of the cache
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
    """The entry in ``data`` if it is whole and belongs to ``digest``, else
    :class:`UnusableEntry`."""
    if len(data) < _HEADER.size:
        raise UnusableEntry(f"truncated entry ({len(data)} bytes, shorter than its header)")
    magic, checksum, n_meta, n_payload = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise UnusableEntry("not an entry of this cache format")
    body = data[_HEADER.size :]
    if len(body) != n_meta + n_payload:
        raise UnusableEntry(f"truncated entry ({len(body)} of {n_meta + n_payload} body bytes)")
    if hashlib.sha256(body).digest() != checksum:
        raise UnusableEntry("checksum mismatch")
    try:
        meta = json.loads(body[:n_meta])
    except ValueError as exc:
        raise UnusableEntry(f"unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("key") != digest:
        raise UnusableEntry("entry stored under another key")
    if not isinstance(meta.get("meta"), dict):
        raise UnusableEntry("metadata without the compiler's fields")
    return CachedKernel(bytes(body[n_meta:]), meta["meta"])


def stamp() -> tuple[int, int]:
    """(atime, mtime) for an entry's recency stamp: the clock in ns. ``os.utime`` without times
    would take the kernel's coarse file clock (a jiffy), tying entries used milliseconds apart."""
    now = time.time_ns()
    return now, now


__all__ = [
    "FORMAT",
    "CachedKernel",
    "KernelKey",
    "UnusableEntry",
    "decode_entry",
    "encode_entry",
    "stamp",
]

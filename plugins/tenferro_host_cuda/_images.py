r"""Module image validation: reject garbage before the driver sees it.

CUBIN is an ELF file (magic ``\x7fELF``), a fatbin starts with ``0xBA55ED50`` (little endian),
PTX is text without NUL bytes. Headers are checked against the image length so a truncated file
fails here with :class:`~tenferro_host.errors.ModuleLoadError`, not inside the driver.
"""

from __future__ import annotations

import struct

from tenferro_host import ModuleLoadError, ValidationError

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)


def as_bytes(image: object, argument: str, op: str | None) -> bytes:
    """``image`` as bytes (str is encoded, as PTX text), or ValidationError naming ``argument``."""
    if isinstance(image, str):
        return image.encode()
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    raise ValidationError(
        f"{argument} must be bytes (or str for PTX), got {type(image).__name__}",
        argument=argument,
        op=op,
    )


def check_binary(data: bytes, op: str | None = None) -> str:
    """Validate a CUBIN (ELF) or fatbin image; return "cubin" or "fatbin"."""
    if data.startswith(ELF_MAGIC):
        _check_elf(data, op)
        return "cubin"
    if data.startswith(FATBIN_MAGIC):
        if len(data) < 16:
            raise ModuleLoadError(
                f"fatbin image of {len(data)} bytes is truncated (header needs 16)", op=op
            )
        header_size, fat_size = struct.unpack_from("<HQ", data, 6)
        if header_size + fat_size > len(data):
            raise ModuleLoadError(
                f"fatbin image is truncated: its header announces {header_size + fat_size} "
                f"bytes, got {len(data)}; rebuild it or read the whole file",
                op=op,
            )
        return "fatbin"
    raise ModuleLoadError(
        f"not a CUBIN or fatbin image (starts with {data[:4]!r}; expected ELF magic "
        "b'\\x7fELF' or fatbin magic 0xBA55ED50); pass PTX text to load_ptx instead",
        op=op,
    )


def _check_elf(data: bytes, op: str | None) -> None:
    if len(data) < 64 or data[4] != 2:
        raise ModuleLoadError(
            f"CUBIN image of {len(data)} bytes is truncated or not 64-bit ELF", op=op
        )
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    if end > len(data):
        raise ModuleLoadError(
            f"CUBIN image is truncated: its ELF headers reach byte {end}, got {len(data)}; "
            "rebuild it or read the whole file",
            op=op,
        )


def check_ptx(data: bytes, op: str | None = None) -> bytes:
    """Validate PTX text; return it NUL-terminated for the driver."""
    body = data[:-1] if data.endswith(b"\0") else data
    if data.startswith((ELF_MAGIC, FATBIN_MAGIC)):
        raise ModuleLoadError("this is a binary image, not PTX; use load_cubin", op=op)
    if b"\0" in body:
        raise ModuleLoadError(
            "PTX must be text without NUL bytes; this looks binary (use load_cubin for "
            "CUBIN/fatbin)",
            op=op,
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModuleLoadError(f"PTX is not UTF-8 text: {exc}", op=op) from exc
    if ".version" not in text or ".target" not in text:
        raise ModuleLoadError(
            "PTX text lacks the '.version' and '.target' directives; pass the whole nvcc/NVRTC "
            "PTX output",
            op=op,
        )
    return body + b"\0"


__all__ = ["ELF_MAGIC", "FATBIN_MAGIC", "as_bytes", "check_binary", "check_ptx"]

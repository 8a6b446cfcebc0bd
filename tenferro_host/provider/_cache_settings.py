"""The kernel cache's settings: three environment variables, read on every lookup.

A wrong value is a :class:`~tenferro_host.errors.ValidationError` naming the variable: the
compiling path turns it into one warning and no cache, the ``cache`` command into an error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._env import env_switch
from ..errors import ValidationError

ENV_DIR = "TENFERRO_CACHE_DIR"
ENV_MAX_BYTES = "TENFERRO_CACHE_MAX_BYTES"
ENV_SWITCH = "TENFERRO_CACHE"
DEFAULT_MAX_BYTES = 1 << 30
OFF = ("off", "0", "false", "no")
ON = ("", "on", "1", "true", "yes")

_SIZE = r"^(\d+)\s*([KMGT]?)(?:I?B)?$"  # compiled at its first use, not at import
_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from ``"1073741824"``, ``"512M"``, ``"2GiB"``; ValidationError when not a size."""
    found = re.match(_SIZE, text.strip().upper())
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


def switched_on() -> bool:
    """``TENFERRO_CACHE`` read as on (unset, on/1/true/yes) or off (off/0/false/no)."""
    return env_switch(ENV_SWITCH, ON, OFF, "is not 'on' or 'off' (also 1/true/yes, 0/false/no)")


def max_bytes() -> int:
    """``TENFERRO_CACHE_MAX_BYTES``, else the default bound of 1 GiB."""
    text = os.environ.get(ENV_MAX_BYTES, "").strip()
    return parse_size(text) if text else DEFAULT_MAX_BYTES


__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENV_DIR",
    "ENV_MAX_BYTES",
    "ENV_SWITCH",
    "OFF",
    "default_dir",
    "max_bytes",
    "parse_size",
    "switched_on",
]

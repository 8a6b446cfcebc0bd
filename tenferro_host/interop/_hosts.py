"""The host the framework bridges use when the caller names none: one per process."""

from __future__ import annotations

import threading

from .._host import Host

_LOCK = threading.Lock()
_DEFAULT: list[Host] = []


def default_host() -> Host:
    """The process's bridge host, made on first use (framework operators are process-global)."""
    with _LOCK:
        if not _DEFAULT:
            _DEFAULT.append(Host())
        return _DEFAULT[0]


__all__ = ["default_host"]

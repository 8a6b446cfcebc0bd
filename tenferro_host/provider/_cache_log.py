"""What the kernel cache tells: its one warning class and its debug lines.

Both the cache (:mod:`._kernel_cache`) and its store (:mod:`._kernel_cache_store`) speak through
here, so neither imports the other for it.
"""

from __future__ import annotations

import sys
from typing import Any

LOGGER = "tenferro_host.kernel_cache"


class KernelCacheWarning(UserWarning):
    """The kernel cache cannot be used (directory unwritable, full, not private,
    misconfigured) or held an entry its backend rejected; compiling goes on without it."""


def debug(message: str, *args: Any) -> None:
    """A debug line on the ``tenferro_host.kernel_cache`` logger. Only a process that imported
    ``logging`` can have configured a handler, so the module is not imported for it."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(LOGGER).debug(message, *args)


def debugging() -> bool:
    """Whether a debug line would be written (to skip building one that would not)."""
    logging = sys.modules.get("logging")
    return logging is not None and logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)


__all__ = ["LOGGER", "KernelCacheWarning", "debug", "debugging"]

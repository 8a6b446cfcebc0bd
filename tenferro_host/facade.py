"""Lazy facade support (PEP 562): public names that resolve from a provider plugin on first use.

A facade module (``tenferro_host.cuda``, ``tenferro_host.webgpu``) imports no GPU library; the
provider package is imported only when one of its names is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_names(
    facade: str, names: Mapping[str, str], own: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``facade``: each of ``names`` maps to its module.
    A name resolved once is kept in the facade's globals (``own``), so a later read is a plain
    attribute lookup: an op variant may read ``tf.cpu.CpuRuntime`` on every call."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - a module __getattr__ (PEP 562)
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}")
        value = own[name] = getattr(importlib.import_module(module), name)
        return value

    def __dir__() -> list[str]:  # noqa: N807 - a module __dir__ (PEP 562)
        return sorted({*own, *names})

    return __getattr__, __dir__


__all__ = ["lazy_names"]

"""Doctest collection: a bridge whose framework is not installed is left out, not an error."""

from __future__ import annotations

import importlib.util

collect_ignore = [
    f"{name}.py" for name in ("torch", "jax") if importlib.util.find_spec(name) is None
] + (["_xla_ffi.py"] if importlib.util.find_spec("jax") is None else [])

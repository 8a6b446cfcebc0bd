"""The host's environment switches: one reading for every variable that is on or off.

A switch ignores case and surrounding blanks, and reads unset as ``""``; a value in neither set
is a :class:`~tenferro_host.errors.ValidationError` naming the variable and what to set.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from .errors import ValidationError


def env_switch(name: str, on: Collection[str], off: Collection[str], refusal: str) -> bool:
    """True when ``$name`` is in ``on``, False when in ``off``; else the error
    ``"{name}={value!r} {refusal}"``."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in off:
        return False
    if value in on:
        return True
    raise ValidationError(f"{name}={raw!r} {refusal}", argument=name)


__all__ = ["env_switch"]

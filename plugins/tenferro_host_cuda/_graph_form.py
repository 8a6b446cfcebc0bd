"""Which form ``ex.capture()`` takes on CUDA: a native CUDA graph (:mod:`._native_graph`, the
default) or, with ``TENFERRO_CUDA_GRAPHS=replayed``, the recorded calls replayed as on every
other backend (a graph the native form cannot follow keeps that form anyway and says why)."""

from __future__ import annotations

import os

from tenferro_host import ValidationError

VARIABLE = "TENFERRO_CUDA_GRAPHS"
FORMS = ("native", "replayed")


def registered_form() -> str:
    """The form ``caps`` names; an unknown value is reported when a capture opens."""
    return "replayed" if os.environ.get(VARIABLE) == "replayed" else "native"


def native_graphs() -> bool:
    """Whether a capture opened now records a native graph."""
    value = os.environ.get(VARIABLE, "native")
    if value not in FORMS:
        raise ValidationError(
            f"{VARIABLE}={value!r} is not a capture form; use one of {', '.join(FORMS)}",
            argument=VARIABLE,
        )
    return value == "native"

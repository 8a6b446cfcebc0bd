"""Which form ``ex.capture()`` takes on CUDA: ``TENFERRO_CUDA_GRAPHS=native`` records a native
CUDA graph (:mod:`._native_graph`), ``replayed`` (the default) replays the recorded plans.

The native form has run only against the recording stand-in driver, never on a GPU: until it
has, it is opt-in, and the form that has run on the H200 stays the default."""

from __future__ import annotations

import os

from tenferro_host import ValidationError

VARIABLE = "TENFERRO_CUDA_GRAPHS"
FORMS = ("replayed", "native")


def registered_form() -> str:
    """The form ``caps`` names; an unknown value is reported when a capture opens."""
    return "native" if os.environ.get(VARIABLE) == "native" else "replayed"


def native_graphs() -> bool:
    """Whether a capture opened now records a native graph."""
    value = os.environ.get(VARIABLE, "replayed")
    if value not in FORMS:
        raise ValidationError(
            f"{VARIABLE}={value!r} is not a capture form; use one of {', '.join(FORMS)}",
            argument=VARIABLE,
        )
    return value == "native"

"""Operation specifications: what an operation package declares through the registry.

>>> import numpy as np
>>> spec = OpSpec(
...     name="my_pkg.scale",
...     signature=Signature(inputs=("x",), attributes={"factor": float}),
...     reference=lambda x, factor=1.0: x * factor,
...     variants={"cpu": lambda ex, x, factor=1.0: ex.runtime.upload(x.download() * factor)},
... )
>>> spec.package
'my_pkg'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ValidationError

#: Variant kinds an op may declare; ``dsl`` expands to every backend with JIT_KERNEL.
VARIANT_KINDS = ("cpu", "cuda-raw", "dsl")
#: The native variant kind of each backend kind, preferred over ``dsl``.
NATIVE_VARIANT = {"cpu": "cpu", "cuda": "cuda-raw"}
_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$")


@dataclass(frozen=True)
class Signature:
    """Inputs, outputs, scalar attributes, and the dtype and shape rules of an op.

    ``dtypes`` lists the input dtypes the op accepts (the CLI draws random inputs from it);
    ``dtype_rule``/``shape_rule`` are ``"same"`` (every input and output alike) or callables
    from the input dtypes/shapes to the output ones.
    """

    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ("out",)
    attributes: Mapping[str, type] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float32",)
    dtype_rule: str | Callable[..., Any] = "same"
    shape_rule: str | Callable[..., Any] = "same"


@dataclass(frozen=True, eq=False)
class KernelSource:
    """A kernel an op ships, for compile-only checks: ``language`` is "cuda" or "dsl".

    ``build_info`` records what the package's build step produced (e.g. a fatbin and its
    ``gencode`` targets) or why it did not; ``ops`` and ``caps`` show it.
    """

    name: str
    language: str
    source: Any
    archs: tuple[str, ...] = ()
    build_info: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for people: what was prebuilt, else how the kernel is compiled."""
        built = self.build_info.get("gencode") if self.build_info.get("fatbin") else None
        if built:
            codes = ", ".join(g.rpartition("code=")[2] for g in built)
            return f"{self.name} ({self.language}): prebuilt {codes}"
        reason = self.build_info.get("reason")
        tail = f" ({reason})" if reason else ""
        return f"{self.name} ({self.language}): compiled at run time{tail}"


@dataclass(frozen=True)
class OpSpec:
    """One operation: name (``package.op``), signature, numpy reference and variants."""

    name: str
    signature: Signature
    reference: Callable[..., Any]
    variants: Mapping[str, Callable[..., Any]]
    kernels: tuple[KernelSource, ...] = ()
    doc: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValidationError(
                f"op name {self.name!r} must be namespaced by its package, e.g. 'my_pkg.add'",
                argument="name",
            )
        unknown = set(self.variants) - set(VARIANT_KINDS)
        if unknown:
            raise ValidationError(
                f"op {self.name!r} declares unknown variant kinds {sorted(unknown)}; "
                f"use {', '.join(VARIANT_KINDS)}",
                argument="variants",
            )
        if not callable(self.reference):
            raise ValidationError(
                f"op {self.name!r} needs a callable reference", argument="reference"
            )

    @property
    def package(self) -> str:
        return self.name.split(".", 1)[0]

    def variant_kind_for(self, backend_kind: str, has_jit: bool) -> str | None:
        """The variant kind that runs on ``backend_kind``: native first, then ``dsl``."""
        native = NATIVE_VARIANT.get(backend_kind)
        if native in self.variants:
            return native
        if has_jit and "dsl" in self.variants:
            return "dsl"
        return None


__all__ = ["NATIVE_VARIANT", "VARIANT_KINDS", "KernelSource", "OpSpec", "Signature"]

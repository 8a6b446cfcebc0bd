"""Residency checks: a session accepts only tensors of its runtime's allocation domain."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ForeignRuntimeError, ValidationError
from ..tensor import Tensor

if TYPE_CHECKING:
    from ._runtime import Runtime


def require_resident(runtime: Runtime, t: Any, *, argument: str, op: str | None) -> Tensor:
    """Return ``t`` if it is a Tensor of ``runtime``'s domain; raise a typed error otherwise."""
    if not isinstance(t, Tensor):
        if hasattr(t, "__array__") or hasattr(t, "__dlpack__"):
            raise ForeignRuntimeError(
                f"{argument} is a {type(t).__name__}, not a tensor of {runtime.name!r}; upload "
                f"it first (backend.upload) or import it with backend.from_dlpack",
                op=op,
            )
        raise ValidationError(
            f"{argument} must be a tenferro_host.Tensor, got {type(t).__name__}",
            argument=argument,
            op=op,
        )
    domain = t.storage.domain
    if domain is runtime.domain or domain == runtime.domain:  # identity first: no __eq__ call
        return t
    owner = t.storage.runtime
    if owner.kind == "cpu" and runtime.kind != "cpu":
        hint = f"it is a host tensor; upload it first with {runtime.name!r}.upload(t.download())"
    elif owner.same_device(runtime) and runtime.kind == "cuda":
        hint = (
            f"it belongs to {owner.name!r}, another runtime on the same device; copy it with "
            "tf.cuda.copy_from_same_device"
        )
    elif owner.same_device(runtime):
        hint = (
            f"it belongs to {owner.name!r}, another runtime on the same device; move it "
            f"explicitly: {runtime.name!r}.upload(t.download())"
        )
    else:
        hint = f"it lives on {owner.name!r}; copy it explicitly to {runtime.name!r}"
    raise ForeignRuntimeError(
        f"{argument} is not owned by this session's runtime {runtime.name!r}: {hint}", op=op
    )


__all__ = ["require_resident"]

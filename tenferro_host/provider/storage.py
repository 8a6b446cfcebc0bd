"""Storage base: memory stamped with the allocation domain that owns it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..identity import AllocationDomainId
    from .runtime import Runtime


class Storage:
    """A buffer owned by one runtime's allocation domain.

    ``kind`` is ``"owned"`` (allocated by the runtime) or ``"imported"`` (another library's
    memory brought in by ``from_dlpack``). Providers subclass it to hold their handle; a
    zero-byte storage holds no memory at all (empty tensors allocate nothing).
    """

    __slots__ = ("__weakref__", "domain", "kind", "nbytes", "runtime")

    def __init__(self, runtime: Runtime, nbytes: int, kind: str = "owned") -> None:
        self.runtime = runtime
        self.domain: AllocationDomainId = runtime.domain
        self.nbytes = nbytes
        self.kind = kind

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind}, {self.nbytes} B, {self.runtime.name})"


__all__ = ["Storage"]

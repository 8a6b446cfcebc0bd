"""Storage base: memory stamped with the allocation domain that owns it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ValidationError

if TYPE_CHECKING:
    from ..identity import AllocationDomainId
    from ..tensor import Tensor
    from ._runtime import Runtime


class Storage:
    """A buffer owned by one runtime's allocation domain.

    ``kind`` is ``"owned"`` (allocated by the runtime) or ``"imported"`` (another library's
    memory brought in by ``from_dlpack``). ``read_only`` marks an import the producer lent
    read-only (a non-writable numpy array, a DLPack tensor flagged READ_ONLY): nothing may take
    a writable view of it. Providers subclass it to hold their handle; a zero-byte storage holds
    no memory at all (empty tensors allocate nothing).
    """

    __slots__ = ("__weakref__", "domain", "kind", "nbytes", "read_only", "runtime")

    def __init__(
        self, runtime: Runtime, nbytes: int, kind: str = "owned", read_only: bool = False
    ) -> None:
        self.runtime = runtime
        self.domain: AllocationDomainId = runtime.domain
        self.nbytes = nbytes
        self.kind = kind
        self.read_only = read_only

    def __repr__(self) -> str:
        ro = ", read-only" if self.read_only else ""
        return f"{type(self).__name__}({self.kind}{ro}, {self.nbytes} B, {self.runtime.name})"


_COPY_IT = "pass a writable tensor, e.g. the copy backend.canonicalize(t) makes"


def require_writable(
    t: Tensor, what: str, argument: str, op: str | None = None, fix: str = _COPY_IT
) -> None:
    """Refuse writing a read-only import: the contract never hands out a writable view of a
    tensor borrowed read-only (docs/contract.md). ``what`` says who writes it."""
    if t.storage.read_only:
        raise ValidationError(
            f"{what}, but that tensor is read-only (imported from a read-only buffer); {fix}",
            argument=argument,
            op=op,
        )


__all__ = ["Storage", "require_writable"]

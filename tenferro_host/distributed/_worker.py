"""The object inside one host actor: a ``Host``, the one runtime it owns, and its tensors.

Tensors never leave the actor's device: ``upload`` and ``run`` keep them in the actor's table and
answer a :class:`TensorHandle` (a few fields, cheap to send); ``download`` is the one way back to
the caller's memory. A plain class, so that it runs (and is tested) without Ray as well; the pool
makes it a Ray actor.
"""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._host import Host
from ..errors import (
    ForeignRuntimeError,
    RuntimeStateError,
    SessionClosedError,
    TenferroError,
    ValidationError,
)
from ..tensor import Tensor
from .caps import ActorCaps, actor_caps
from .collectives import NcclCommunicator, load_binding

#: The communicator methods ``HostWorker.collective`` runs.
COLLECTIVES = ("all_reduce", "all_gather", "broadcast")


@dataclass(frozen=True)
class TensorHandle:
    """A tensor that stays in host actor ``owner``: what remote calls take and return."""

    owner: str
    key: int
    shape: tuple[int, ...]
    dtype: str
    backend: str


def _node_id() -> str:
    """The Ray node this process runs on; empty outside Ray (which this module never imports)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())


class HostWorker:
    """One host actor's state: ``Host()``, the runtime ``backend`` and the tensors it holds."""

    def __init__(self, backend: str, *, probe_p2p: bool = False) -> None:
        self.backend = backend
        self.node_id = _node_id()
        self.id = f"{backend}@{self.node_id[:8] or 'local'}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self._probe_p2p = probe_p2p
        self._tensors: dict[int, Tensor] = {}
        self._keys = itertools.count()
        self._communicator: NcclCommunicator | None = None
        # Ray keeps only the text of an error raised while an actor is made: a typed one is
        # kept here and raised by ping(), so that the pool's start raises it as itself.
        self._unusable: TenferroError | None = None
        try:
            self.host = Host()
            self.runtime = self.host.backend(backend)
        except TenferroError as exc:
            self._unusable = exc

    # -- tensors -------------------------------------------------------------------------------
    def _handle(self, t: Tensor) -> TensorHandle:
        key = next(self._keys)
        self._tensors[key] = t
        return TensorHandle(self.id, key, t.shape, t.dtype.name, self.backend)

    def _tensor(self, handle: TensorHandle) -> Tensor:
        if handle.owner != self.id:
            raise ForeignRuntimeError(
                f"tensor handle {handle.key} lives in host actor {handle.owner}, not in "
                f"{self.id}; run the op on the actor that holds it, or download it and upload "
                "it here"
            )
        try:
            return self._tensors[handle.key]
        except KeyError:
            raise SessionClosedError(
                f"tensor handle {handle.key} of host actor {self.id} was freed; use a handle "
                "before freeing it"
            ) from None

    def _output(self, value: Any) -> Any:
        if isinstance(value, Tensor):
            return self._handle(value)
        if isinstance(value, tuple | list):
            return type(value)(self._output(v) for v in value)
        return value

    def upload(self, *arrays: np.ndarray) -> TensorHandle | tuple[TensorHandle, ...]:
        """Copy host arrays onto the actor's device; one handle per array."""
        handles = tuple(self._handle(self.runtime.upload(a)) for a in arrays)
        return handles[0] if len(handles) == 1 else handles

    def download(self, handle: TensorHandle) -> np.ndarray:
        """The tensor's values as a numpy array (the one copy back to the caller)."""
        return self.runtime.download(self._tensor(handle))

    def free(self, *handles: TensorHandle) -> None:
        """Drop the actor's reference to each tensor (its memory goes back to the runtime)."""
        for handle in handles:
            self._tensor(handle)
            del self._tensors[handle.key]

    def held(self) -> int:
        """How many tensors the actor holds."""
        return len(self._tensors)

    # -- operations ----------------------------------------------------------------------------
    def run(self, op: str, *args: Any, **attrs: Any) -> Any:
        """Run a registered op on the actor's runtime; tensor results come back as handles."""
        tensors = [self._tensor(a) if isinstance(a, TensorHandle) else a for a in args]
        return self._output(self.host.run(op, *tensors, backend=self.backend, **attrs))

    def run_arrays(self, op: str, arrays: tuple[np.ndarray, ...], attrs: dict[str, Any]) -> Any:
        """Upload a shard's arrays and run ``op`` on them in one call; only its result stays."""
        tensors = [self.runtime.upload(a) for a in arrays]
        return self._output(self.host.run(op, *tensors, backend=self.backend, **attrs))

    def ping(self) -> str:
        """The actor's id (the ``owner`` of its handles), or the error that made it unusable."""
        if self._unusable is not None:
            raise self._unusable
        return self.id

    def caps(self) -> ActorCaps:
        """What this actor offers (see :mod:`tenferro_host.distributed.caps`)."""
        return actor_caps(self.host, self.backend, self.node_id, probe_p2p=self._probe_p2p)

    def stats(self) -> dict[str, int]:
        """The runtime's counters (allocations, synchronizations ...)."""
        return self.runtime.stats()

    # -- collectives (bootstrapped by the pool; see collectives.py) ----------------------------
    def collective_unique_id(self, binding: str) -> bytes:
        """A fresh NCCL unique id, made by rank 0 and shared with every rank through Ray."""
        return load_binding(binding).unique_id()

    def collective_init(self, unique_id: bytes, nranks: int, rank: int, binding: str) -> int:
        """Join the communicator of ``unique_id`` as ``rank`` on this actor's runtime."""
        if self._communicator is not None:
            self._communicator.close()
            self._communicator = None
        self._communicator = NcclCommunicator(
            self.runtime, nranks, rank, unique_id, binding=load_binding(binding)
        )
        return rank

    def collective(self, name: str, *handles: TensorHandle, **kwargs: Any) -> TensorHandle:
        """Run collective ``name`` (all_reduce, all_gather, broadcast) of the communicator."""
        if name not in COLLECTIVES:
            raise ValidationError(
                f"collective {name!r} is not one of {', '.join(COLLECTIVES)}", argument="name"
            )
        if self._communicator is None:
            raise RuntimeStateError(
                f"host actor {self.id} has no communicator; call pool.init_collectives() first"
            )
        tensors = [self._tensor(h) for h in handles]
        return self._handle(getattr(self._communicator, name)(*tensors, **kwargs))


__all__ = ["HostWorker", "TensorHandle"]

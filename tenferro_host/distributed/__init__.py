"""Op packages on a Ray cluster: one host per GPU, tensors that stay on their device.

A :class:`HostPool` starts one host actor per GPU of the cluster (each owns a ``Host`` and the
runtime of its GPU; for CPU or WebGPU backends, one per node), runs any registered op in them on
tensors they hold, and returns each call's Ray ``ObjectRef``: Ray's own reference counting keeps
the call's tensors in their actor while the ref is in scope (``ray.get`` gives its
:class:`TensorHandle`); ``gather`` downloads. Errors raised in an actor reach the caller as the
same typed errors; a call not answered in time is a ``CallTimeoutError``, one whose actor died a
``HostActorDiedError``. Placement follows Ray resources, placement groups and each actor's caps
(:mod:`.caps`); NCCL collectives live in :mod:`.collectives`. Needs the ``ray`` extra; this
package imports Ray only when a pool starts or a result is awaited.
"""

from __future__ import annotations

from ._pool import DEFAULT_START_TIMEOUT_S, HostPool
from ._remote import DEFAULT_TIMEOUT_S, Pending, RemoteHost, wait
from ._worker import HostWorker, TensorHandle
from .caps import ActorCaps, arch_resource, node_resources

__all__ = [
    "DEFAULT_START_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "ActorCaps",
    "HostPool",
    "HostWorker",
    "Pending",
    "RemoteHost",
    "TensorHandle",
    "arch_resource",
    "node_resources",
    "wait",
]

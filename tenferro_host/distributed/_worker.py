"""The object inside one host actor: a ``Host``, the one runtime it owns, and its tensors.

Tensors never leave the actor's device. Each call that makes tensors (``upload``, ``run``)
comes with a *call key* its caller chose, keeps its tensors under that key and answers each
tensor's *address* (a short string, the value Ray moves fastest; :class:`TensorHandle` reads
it); the caller holds the call's Ray
``ObjectRef`` and, when Ray's reference counting finds it out of scope, sends the key back to
``release`` (see ``_remote.py``). ``download`` is the one way back to the caller's memory. A
plain class, so that it runs (and is tested) without Ray as well; the pool makes it a Ray actor.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from typing import Any, NamedTuple

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
#: Seconds ``collective_abort`` waits for a join or collective in flight to notice the abort.
ABORT_WAIT_S = 10.0
#: What ``collective_abort`` answers once it is done: a join or collective of the communicator
#: was running (it ended, aborted); the join of the id it was given had begun and ended; the
#: communicator was idle (aborted now); nothing of it was joined here yet (its join refuses when
#: it begins). Otherwise it answers why not.
ABORTED = ("in flight", "ended", "idle", "not begun")


class TensorHandle(NamedTuple):
    """Output ``output`` of call ``call`` in host actor ``owner``, read from its *address*: the
    short string a result's ``ObjectRef`` resolves to (``ray.get(ref)``), the value Ray moves
    fastest, once per result and once per argument. It lives as long as that ref (or until
    ``free``)."""

    owner: str
    call: str
    output: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def backend(self) -> str:
        """The runtime of the actor that holds it (``cpu:0``, ``cuda:0`` ...)."""
        return self.owner.split("@", 1)[0]

    @property
    def address(self) -> str:
        """What ``ray.get`` of its ref gives, and what a call takes in its place."""
        return address(self.owner, self.call, self.output, self.shape, self.dtype)

    @classmethod
    def parse(cls, address: str) -> TensorHandle:
        """The handle of ``address`` (``ray.get(ref)`` of a tensor result)."""
        try:
            owner, call, output, dtype, shape = address.split("|")
            return cls(owner, call, int(output), _shape(shape), dtype)
        except (ValueError, AttributeError):
            raise ValidationError(
                f"{address!r} is not a tensor's address (ray.get of a host actor's tensor "
                "result gives one)",
                argument="address",
            ) from None


def address(owner: str, call: str, output: int, shape: tuple[int, ...], dtype: str) -> str:
    """``owner|call|output|dtype|shape`` (the shape's sizes joined by ``x``)."""
    return f"{owner}|{call}|{output}|{dtype}|{'x'.join(map(str, shape))}"


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split("x")) if text else ()


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
        self._calls: dict[str, list[Tensor | None]] = {}
        self._communicator: NcclCommunicator | None = None
        # The unique id of the communicator joined or being joined with its cancel event (one
        # attribute: collective_abort reads both at once), the ids collective_abort was given,
        # and the lock that keeps joins and collectives apart from collective_abort's abort.
        self._joining: tuple[bytes, threading.Event] | None = None
        self._aborted: set[bytes] = set()
        self._collective_lock = threading.Lock()
        # Ray keeps only the text of an error raised while an actor is made: a typed one is
        # kept here and raised by ping(), so that the pool's start raises it as itself.
        self._unusable: TenferroError | None = None
        try:
            self.host = Host()
            self.runtime = self.host.backend(backend)
        except TenferroError as exc:
            self._unusable = exc

    # -- tensors -------------------------------------------------------------------------------
    def _keep(self, call: str, value: Any) -> Any:
        """Keep the tensors of ``value`` under ``call``; the value with each as its address."""
        if call in self._calls:
            raise ValidationError(
                f"call key {call!r} is already used in host actor {self.id}; each call needs "
                "its own key",
                argument="call",
            )
        if type(value) is Tensor:  # the common result: one tensor
            self._calls[call] = [value]
            return address(self.id, call, 0, value.shape, value.dtype.name)
        kept: list[Tensor | None] = []

        def addresses(v: Any) -> Any:
            if isinstance(v, Tensor):
                kept.append(v)
                return address(self.id, call, len(kept) - 1, v.shape, v.dtype.name)
            if isinstance(v, tuple | list):
                return type(v)(addresses(x) for x in v)
            return v

        result = addresses(value)
        if kept:
            self._calls[call] = kept
        return result

    def _tensor(self, arg: Any) -> Any:
        """The tensor of ``arg`` (its address, or its handle); any other argument as it is."""
        if type(arg) is str:
            head = arg.split("|", 3)  # owner, call, output: all a lookup needs
            kept = self._calls.get(head[1]) if head[0] == self.id and len(head) == 4 else None
            if kept is not None and head[2] == "0" and kept[0] is not None:
                return kept[0]  # the common argument: a one-tensor result, live
            handle = TensorHandle.parse(arg)
        elif isinstance(arg, TensorHandle):
            handle = arg
        else:
            return arg
        if handle.owner != self.id:
            raise ForeignRuntimeError(
                f"tensor {handle.call}.{handle.output} lives in host actor {handle.owner}, not "
                f"in {self.id}; run the op on the actor that holds it, or download it and "
                "upload it here"
            )
        tensors = self._calls.get(handle.call)
        tensor = tensors[handle.output] if tensors is not None else None
        if tensor is None:
            raise SessionClosedError(
                f"tensor {handle.call}.{handle.output} of host actor {self.id} was freed (its "
                "ObjectRef went out of scope, or free() released it); keep the ref while you "
                "use the tensor"
            )
        return tensor

    def upload(self, calls: tuple[str, ...], *arrays: np.ndarray) -> Any:
        """Copy host arrays onto the actor's device, array ``i`` kept under ``calls[i]``; an
        address per array (one, or a tuple: one Ray return value each)."""
        if len(calls) != len(arrays):
            raise ValidationError(
                f"upload takes one call key per array: {len(calls)} keys, {len(arrays)} arrays",
                argument="calls",
            )
        handles = tuple(
            self._keep(c, self.runtime.upload(a)) for c, a in zip(calls, arrays, strict=True)
        )
        return handles[0] if len(handles) == 1 else handles

    def download(self, tensor: str | TensorHandle) -> np.ndarray:
        """The tensor's values as a numpy array (the one copy back to the caller)."""
        return self.runtime.download(self._tensor(tensor))

    def free(self, *tensors: str | TensorHandle) -> None:
        """Drop the actor's reference to each tensor now (its memory goes back to the runtime);
        the early form of what ``release`` does when the caller's ref goes out of scope."""
        for tensor in tensors:
            self._tensor(tensor)
            handle = TensorHandle.parse(tensor) if isinstance(tensor, str) else tensor
            kept = self._calls[handle.call]
            kept[handle.output] = None
            if not any(t is not None for t in kept):
                del self._calls[handle.call]

    def release(self, calls: list[str]) -> None:
        """Drop every tensor of these calls: their refs went out of scope in the caller (keys
        already freed, or of calls that made no tensor, are skipped)."""
        for call in calls:
            self._calls.pop(call, None)

    def held(self) -> int:
        """How many tensors the actor holds."""
        return sum(t is not None for tensors in self._calls.values() for t in tensors)

    # -- operations ----------------------------------------------------------------------------
    def run(self, head: str | tuple[str, str, dict[str, Any], tuple[str, ...]], *args: Any) -> Any:
        """Run a registered op on the actor's runtime, its tensors kept under the call's key;
        tensor results come back as addresses. ``head`` says what call: ``"KEY OP"`` for a call
        without attributes (one short string: the common call's whole header on the wire;
        ``"KEY/NAMES OP"`` when the caller's ``run`` took keywords ``NAMES`` as its own), else
        ``(key, op, attrs, reserved)``. A reserved name the op declares as an attribute is
        refused. The call is the planned call of ``Host.run`` on the tensors' runtime."""
        if isinstance(head, str):
            call, _, op = head.partition(" ")
            call, _, names = call.partition("/")
            attrs: dict[str, Any] = {}
            reserved = tuple(names.split(",")) if names else ()
        else:
            call, op, attrs, reserved = head
        if reserved:
            self._refuse_reserved(op, reserved)
        return self._run_op(call, op, [self._tensor(a) for a in args], attrs)

    def _run_op(self, call: str, op: str, tensors: list[Any], attrs: dict[str, Any]) -> Any:
        """``Host.run`` of ``op``, its result kept under ``call``: where its first tensor lives
        (the planned call; ``backend=`` takes the full path every time), else on the runtime."""
        if tensors and type(tensors[0]) is Tensor:
            return self._keep(call, self.host.run(op, *tensors, **attrs))
        return self._keep(call, self.host.run(op, *tensors, backend=self.backend, **attrs))

    def _refuse_reserved(self, op: str, reserved: tuple[str, ...]) -> None:
        entry = self.host.registry.ops.get(op)
        spec = entry.spec if entry is not None else None
        declared = set(spec.signature.attributes) if spec is not None else set()
        for name in reserved:
            if name in declared:
                raise ValidationError(
                    f"op {op!r} declares an attribute {name!r}, which RemoteHost.run takes as "
                    f"the call's own {name}: pass it with RemoteHost.remote(op, ..., "
                    f"{name}=...) and wait with ray.get(ref, timeout=...)",
                    argument=name,
                    op=op,
                )

    def run_arrays(self, call: str, op: str, attrs: dict[str, Any], *arrays: np.ndarray) -> Any:
        """Upload a shard's arrays and run ``op`` on them in one call; only its result stays."""
        return self._run_op(call, op, [self.runtime.upload(a) for a in arrays], attrs)

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

    def collective_init(
        self,
        unique_id: bytes,
        nranks: int,
        rank: int,
        binding: str,
        timeout_s: float | None = None,
    ) -> int:
        """Join the communicator of ``unique_id`` as ``rank`` on this actor's runtime (replacing
        the one it had). The join, and later each collective until NCCL took it, gives up after
        ``timeout_s`` (None: waits for ``collective_abort``), its communicator aborted."""
        with self._collective_lock:
            if self._communicator is not None:
                self._communicator.close()
                self._communicator = None
            cancel = threading.Event()
            self._joining = (unique_id, cancel)
            if unique_id in self._aborted:  # looked at after _joining: collective_abort adds first
                raise SessionClosedError(
                    f"host actor {self.id} was told to abort this communicator before its join "
                    "began (another rank failed, died or timed out); call init_collectives again"
                )
            self._communicator = NcclCommunicator(
                self.runtime,
                nranks,
                rank,
                unique_id,
                binding=load_binding(binding),
                timeout_s=timeout_s,
                cancel=cancel,
            )
        return rank

    def collective_abort(self, unique_id: bytes | None = None) -> str:
        """Abort the communicator of ``unique_id`` (None: the one joined or being joined), so
        that this rank waits for no other: the pool's answer to a rank that failed, died or
        timed out. Called in the actor's ``control`` concurrency group, it runs while the main
        thread is blocked in that join or collective, which then aborts it itself; an idle one
        is aborted here, a join of it not begun yet refuses when it begins. One of
        ``ABORTED``, or why not."""
        if unique_id is not None:
            self._aborted.add(unique_id)
        joining = self._joining
        if joining is None or unique_id not in (None, joining[0]):
            return "not begun"
        joining[1].set()
        in_flight = self._collective_lock.locked()
        if not self._collective_lock.acquire(timeout=ABORT_WAIT_S):
            return f"its join or collective did not let go within {ABORT_WAIT_S} s"
        try:
            if self._joining is joining and self._communicator is not None:
                self._communicator.abort()
        finally:
            self._collective_lock.release()
        return "in flight" if in_flight else "idle" if unique_id is None else "ended"

    def collective(
        self, call: str, name: str, kwargs: dict[str, Any], *tensors: str | TensorHandle
    ) -> str:
        """Run collective ``name`` (all_reduce, all_gather, broadcast) of the communicator; its
        result kept under ``call``, answered as its address."""
        if name not in COLLECTIVES:
            raise ValidationError(
                f"collective {name!r} is not one of {', '.join(COLLECTIVES)}", argument="name"
            )
        with self._collective_lock:
            if self._communicator is None:
                raise RuntimeStateError(
                    f"host actor {self.id} has no communicator; call pool.init_collectives() first"
                )
            args = [self._tensor(t) for t in tensors]
            result: str = self._keep(call, getattr(self._communicator, name)(*args, **kwargs))
        return result


__all__ = ["ABORTED", "HostWorker", "TensorHandle"]

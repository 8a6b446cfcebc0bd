"""NCCL collectives on host tensors, enqueued on the runtime's own stream.

A :class:`NcclCommunicator` is one rank of an NCCL communicator bound to one CUDA runtime.
Every collective opens a session on that runtime like any op does, borrows its tensors in a raw
session (read-only sources, an exclusive destination) and hands NCCL their device pointers and the
runtime's stream: the data never touches host memory, nothing synchronizes, and stream order
keeps the result behind every earlier launch and ahead of every later one. Collectives live here
alone: launches and copies know nothing of them.

The NCCL calls themselves go through a binding (:class:`NcclBinding`: nccl4py's low-level
``nccl.bindings.nccl``). Ranks join with the same unique id, made by rank 0 and shared however the
ranks talk: the host pool shares it through Ray (``HostPool.init_collectives``).

Nothing here blocks inside NCCL: the communicator is NCCL's nonblocking kind, so a join (and a
collective's connection setup) returns at once and is polled until done. Between two looks the
poll gives up after ``timeout_s`` or when its ``cancel`` event is set, and aborts the
communicator (``ncclCommAbort``): a rank whose peer is dead, hung or never joins is freed, and an
abort from another thread never races the NCCL call in flight.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .. import cuda
from ..errors import (
    BackendError,
    CallTimeoutError,
    DTypeError,
    SessionClosedError,
    ShapeError,
    UnsupportedError,
    ValidationError,
)
from ..provider._runtime import Runtime
from ..tensor import Tensor

#: tenferro dtype name -> NCCL data type name (``nccl.bindings.nccl.DataType``).
NCCL_DTYPES = {
    "float16": "Float16",
    "float32": "Float32",
    "float64": "Float64",
    "int32": "Int32",
    "int64": "Int64",
    "uint32": "Uint32",
}
#: reduction name -> NCCL reduction (``nccl.bindings.nccl.RedOp``).
NCCL_REDUCTIONS = {"sum": "Sum", "prod": "Prod", "max": "Max", "min": "Min", "avg": "Avg"}
#: The binding ``HostPool.init_collectives`` loads in each actor by default.
DEFAULT_BINDING = "tenferro_host.distributed.collectives:NcclBinding"
#: The longest pause between two looks at a communicator whose last call is in progress (how
#: late a timeout or an abort may be noticed).
POLL_S = 0.01


class Binding(Protocol):
    """The NCCL calls a communicator makes: nccl4py's, or a stand-in with the same methods."""

    def unique_id(self) -> bytes:
        """A fresh unique id (rank 0 makes it)."""

    def join(self, runtime: Runtime, nranks: int, rank: int, unique_id: bytes) -> Any:
        """Start joining: this rank's communicator on ``runtime``, returned at once (``ready``
        says when every rank joined)."""

    def ready(self, comm: Any) -> bool:
        """False while the communicator's last call (its join, a collective's connection
        setup) is in progress, True once done; its failure as a ``BackendError``."""

    def all_reduce(
        self, comm: Any, send: int, recv: int, count: int, dtype: str, op: str, stream: int
    ) -> None:
        """Enqueue an all-reduce of ``count`` elements on ``stream``."""

    def all_gather(
        self, comm: Any, send: int, recv: int, count: int, dtype: str, stream: int
    ) -> None:
        """Enqueue an all-gather of ``count`` elements per rank on ``stream``."""

    def broadcast(
        self, comm: Any, send: int, recv: int, count: int, dtype: str, root: int, stream: int
    ) -> None:
        """Enqueue a broadcast of ``count`` elements from ``root`` on ``stream``."""

    def close(self, comm: Any) -> None:
        """Destroy this rank's communicator."""

    def abort(self, comm: Any) -> None:
        """Abort this rank's communicator whatever its state: its calls in flight end, and it
        waits for no other rank."""


@contextmanager
def raw_session(runtime: Runtime, what: str) -> Iterator[Any]:
    """A raw session on ``runtime`` (its device current, its stream and pointers reachable)."""
    with runtime.session() as s:
        ex = cuda.exec_session(s)
        if ex is None:
            raise UnsupportedError(
                f"NCCL collectives run on CUDA runtimes; {runtime.name} is not one (start the "
                "pool with backend='cuda')",
                backend=runtime.name,
                feature="collectives",
            )
        with ex.raw(f"tenferro_host.distributed.{what}") as rs:
            yield rs


class NcclBinding:
    """nccl4py's low-level bindings (``nccl.bindings.nccl``), NCCL's errors as ``BackendError``."""

    def __init__(self) -> None:
        try:
            self._nccl = importlib.import_module("nccl.bindings.nccl")
            self.version = int(self._nccl.get_version())  # loads libnccl, or says why not
        except Exception as exc:  # ImportError, or cuda.pathfinder not finding libnccl.so.2
            raise UnsupportedError(
                "NCCL collectives need nccl4py and the NCCL library: pip install "
                f"'nccl4py[cu13]' ({type(exc).__name__}: {str(exc).strip()})",
                feature="collectives",
                reason=str(exc).strip(),
            ) from exc

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._nccl, name)(*args)
        except self._nccl.NCCLError as exc:
            raise BackendError(f"NCCL {name} failed: {exc}") from exc

    def unique_id(self) -> bytes:
        """A fresh ``ncclUniqueId`` as bytes (rank 0 makes it; every rank joins with it)."""
        return bytes(self._call("get_unique_id"))

    def join(self, runtime: Runtime, nranks: int, rank: int, unique_id: bytes) -> Any:
        """``ncclCommInitRankConfig`` with ``blocking=0`` and the runtime's device current: it
        returns at once, without waiting for the other ranks (NCCL copies the config)."""
        config = self._nccl.Config()
        config.blocking = 0
        with raw_session(runtime, "join"):
            return self._call(
                "comm_init_rank_config",
                nranks,
                self._nccl.UniqueId.from_buffer(unique_id),
                rank,
                config.ptr,
            )

    def ready(self, comm: Any) -> bool:
        """``ncclCommGetAsyncError``: ``ncclInProgress`` is False, ``ncclSuccess`` True."""
        state = self._call("comm_get_async_error", comm)
        if state == self._nccl.Result.InProgress:
            return False
        if state != self._nccl.Result.Success:
            raise BackendError(
                f"NCCL communicator failed: {self._nccl.get_error_string(state)} (ncclResult "
                f"{state})"
            )
        return True

    def all_reduce(
        self, comm: Any, send: int, recv: int, count: int, dtype: str, op: str, stream: int
    ) -> None:
        """``ncclAllReduce``."""
        m = self._nccl
        self._call("all_reduce", send, recv, count, m.DataType[dtype], m.RedOp[op], comm, stream)

    def all_gather(
        self, comm: Any, send: int, recv: int, count: int, dtype: str, stream: int
    ) -> None:
        """``ncclAllGather``."""
        self._call("all_gather", send, recv, count, self._nccl.DataType[dtype], comm, stream)

    def broadcast(
        self, comm: Any, send: int, recv: int, count: int, dtype: str, root: int, stream: int
    ) -> None:
        """``ncclBroadcast``."""
        m = self._nccl
        self._call("broadcast", send, recv, count, m.DataType[dtype], root, comm, stream)

    def close(self, comm: Any) -> None:
        """``ncclCommDestroy``."""
        self._call("comm_destroy", comm)

    def abort(self, comm: Any) -> None:
        """``ncclCommAbort`` (NCCL makes the communicator's device current itself)."""
        self._call("comm_abort", comm)


def load_binding(spec: str) -> Binding:
    """The binding named ``module:Class`` (made with no arguments)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValidationError(
            f"a collectives binding is named 'module:Class', got {spec!r}", argument="binding"
        )
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(
            f"collectives binding {spec!r} cannot be loaded here ({type(exc).__name__}: {exc}); "
            "install its module on every node",
            argument="binding",
        ) from exc
    binding: Binding = factory()
    return binding


class NcclCommunicator:
    """Rank ``rank`` of ``nranks`` of the NCCL communicator of ``unique_id``, on ``runtime``.

    Joining waits until every rank has joined (NCCL's rule): call it on all ranks at once. The
    join, and each collective until NCCL took it, waits at most ``timeout_s`` (None: no bound)
    and until ``cancel`` is set; then this rank's communicator is aborted and the call raises.
    Another thread aborts a communicator mid-call by setting ``cancel``; an idle one, by
    :meth:`abort` (never both at once: the call in flight aborts it itself).
    """

    def __init__(
        self,
        runtime: Runtime,
        nranks: int,
        rank: int,
        unique_id: bytes,
        *,
        binding: Binding | None = None,
        timeout_s: float | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        if not 0 <= rank < nranks:
            raise ValidationError(
                f"rank {rank} is outside 0..{nranks - 1}; give each of the {nranks} ranks "
                "its own index",
                argument="rank",
            )
        self.runtime = runtime
        self.nranks = nranks
        self.rank = rank
        self.binding = binding if binding is not None else NcclBinding()
        self.timeout_s = timeout_s
        self.cancel = cancel if cancel is not None else threading.Event()
        self._closed_by = "close()"  # what a call after the end says closed it
        self._comm: Any = self.binding.join(runtime, nranks, rank, unique_id)
        self._settle("join")

    def close(self) -> None:
        """Destroy this rank's communicator (every rank closes its own)."""
        if self._comm is not None:
            comm, self._comm = self._comm, None
            self.binding.close(comm)

    def abort(self) -> None:
        """Abort this rank's communicator: a collective still running on the device ends (its
        result undefined) and it waits for no other rank; every later call raises."""
        if self._comm is not None:
            comm, self._comm = self._comm, None
            self._closed_by = "an abort (a rank failed, died or timed out)"
            self.binding.abort(comm)

    def _settle(self, what: str) -> None:
        """Poll until NCCL finished the last call; abort after ``timeout_s``, on ``cancel``
        or on NCCL's error."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        pause = 0.0005
        while True:
            if self.cancel.is_set():
                self.abort()
                raise SessionClosedError(
                    f"rank {self.rank}'s {what} was aborted while it waited for the other "
                    f"ranks (one failed, died or timed out); make a new communicator"
                )
            try:
                if self.binding.ready(self._comm):
                    return
            except BackendError as exc:
                self.abort()
                exc.add_note("this rank's communicator is aborted: make a new one on every rank")
                raise
            if deadline is not None and time.monotonic() >= deadline:
                self.abort()
                raise CallTimeoutError(
                    f"rank {self.rank} of {self.nranks}: NCCL {what} did not complete within "
                    f"{self.timeout_s:.3g} s (a rank did not join or call it: dead, hung or busy); "
                    "this rank's communicator is aborted: make a new one on every rank",
                    timeout_s=self.timeout_s,
                )
            time.sleep(pause)
            pause = min(pause * 2, POLL_S)

    def _enqueue(
        self,
        what: str,
        src: Tensor,
        dst: Tensor | None,
        shape: tuple[int, ...],
        call: Callable[..., None],
        *extra: Any,
    ) -> Tensor:
        """``call`` (a :class:`Binding` collective) on the source's and destination's pointers,
        ``src``'s count and NCCL dtype, then ``extra`` (the collective's own arguments) and the
        stream."""
        if self._comm is None:
            raise SessionClosedError(
                f"{what} on a closed communicator (closed by {self._closed_by}); make a new one "
                "(in a pool: pool.init_collectives())"
            )
        if src.dtype.name not in NCCL_DTYPES:
            raise DTypeError(
                f"{what} takes {', '.join(NCCL_DTYPES)}, got {src.dtype.name}", argument="src"
            )
        if dst is not None and (dst.dtype != src.dtype or dst.shape != shape):
            raise ShapeError(
                f"{what} writes a {src.dtype.name}{list(shape)} destination, got "
                f"{dst.dtype.name}{list(dst.shape)}; pass one of that dtype and shape or none",
                argument="dst",
            )
        with raw_session(self.runtime, what) as rs:
            out = rs.alloc_output(src.dtype, shape) if dst is None else dst
            recv = rs.tensor_mut(out)
            send = recv if out is src else rs.tensor(src)
            call(
                self._comm,
                send.data_ptr_unsafe(),
                recv.data_ptr_unsafe(),
                src.numel,
                NCCL_DTYPES[src.dtype.name],
                *extra,
                rs.stream.native_handle_unsafe(),
            )
        self._settle(what)  # before anything else is launched on the stream (NCCL's rule)
        return out

    def all_reduce(self, src: Tensor, dst: Tensor | None = None, op: str = "sum") -> Tensor:
        """Every rank's ``src`` reduced by ``op`` (sum, prod, max, min, avg) into ``dst``
        (fresh when None; ``dst=src`` reduces in place)."""
        if op not in NCCL_REDUCTIONS:
            raise ValidationError(
                f"all_reduce reduces by {', '.join(NCCL_REDUCTIONS)}, got {op!r}", argument="op"
            )
        return self._enqueue(
            "all_reduce", src, dst, src.shape, self.binding.all_reduce, NCCL_REDUCTIONS[op]
        )

    def all_gather(self, src: Tensor, dst: Tensor | None = None) -> Tensor:
        """Every rank's ``src`` side by side, rank order: shape ``(nranks, *src.shape)``."""
        shape = (self.nranks, *src.shape)
        return self._enqueue("all_gather", src, dst, shape, self.binding.all_gather)

    def broadcast(self, src: Tensor, dst: Tensor | None = None, root: int = 0) -> Tensor:
        """Rank ``root``'s ``src`` on every rank (each rank passes a ``src`` of that shape)."""
        if not 0 <= root < self.nranks:
            raise ValidationError(f"root {root} is outside 0..{self.nranks - 1}", argument="root")
        return self._enqueue("broadcast", src, dst, src.shape, self.binding.broadcast, root)


__all__ = [
    "DEFAULT_BINDING",
    "NCCL_DTYPES",
    "NCCL_REDUCTIONS",
    "POLL_S",
    "Binding",
    "NcclBinding",
    "NcclCommunicator",
    "load_binding",
    "raw_session",
]

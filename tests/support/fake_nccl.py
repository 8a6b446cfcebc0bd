"""Stand-in NCCL bindings for the collectives tests that run without a GPU.

``FakeNccl``: nonblocking like the NCCL binding. A rank joins by leaving a file in the directory
its unique id names (under ``$FAKE_NCCL_DIR``) and is ready once every rank's file is there, so a
bootstrap that joined ranks one at a time, or with different ids, never gets ready here as it
would hang with NCCL. ``abort`` leaves ``aborted-rank<r>`` beside them: the trace that the abort
reached that rank's process. ``StuckNccl``: joins that never get ready. ``DriverNccl``: one rank
whose collectives move bytes in the memory of the fake CUDA driver, recording the stream each was
enqueued on.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenferro_host.errors import BackendError

ITEMSIZE = {"Float16": 2, "Float32": 4, "Float64": 8, "Int32": 4, "Int64": 8, "Uint32": 4}


def appears(path: Path, within_s: float = 30.0) -> bool:
    """Whether ``path`` (a rank's file: it joined, or was aborted) exists within ``within_s``."""
    deadline = time.monotonic() + within_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.exists()


@dataclass(frozen=True)
class FakeComm:
    """One rank's communicator: where its ranks meet (None: a lone rank, nowhere)."""

    rank: int
    nranks: int
    where: Path | None


class FakeNccl:
    """Ranks that join through files; every collective call is recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.aborted: set[FakeComm] = set()

    def unique_id(self) -> bytes:
        return tempfile.mkdtemp(prefix="uid-", dir=os.environ.get("FAKE_NCCL_DIR")).encode()

    def join(self, runtime: Any, nranks: int, rank: int, unique_id: bytes) -> Any:
        where = Path(unique_id.decode())
        (where / f"rank{rank}").write_text(f"{runtime.name} {nranks} {os.getpid()}")
        return FakeComm(rank, nranks, where)

    def ready(self, comm: FakeComm) -> bool:
        if comm in self.aborted:
            raise BackendError(f"fake NCCL: rank {comm.rank}'s communicator used after its abort")
        return comm.where is None or len(list(comm.where.glob("rank*"))) >= comm.nranks

    def all_reduce(self, comm, send, recv, count, dtype, op, stream) -> None:
        self.calls.append(("all_reduce", comm, send, recv, count, dtype, op, stream))

    def all_gather(self, comm, send, recv, count, dtype, stream) -> None:
        self.calls.append(("all_gather", comm, send, recv, count, dtype, stream))

    def broadcast(self, comm, send, recv, count, dtype, root, stream) -> None:
        self.calls.append(("broadcast", comm, send, recv, count, dtype, root, stream))

    def close(self, comm) -> None:
        self.calls.append(("close", comm))

    def abort(self, comm: FakeComm) -> None:
        self.calls.append(("abort", comm))
        self.aborted.add(comm)
        if comm.where is not None:
            (comm.where / f"aborted-rank{comm.rank}").write_text(str(os.getpid()))


class DriverNccl(FakeNccl):
    """One rank on the fake CUDA driver ``driver``: a collective copies ``send`` to ``recv``."""

    def __init__(self, driver: Any) -> None:
        super().__init__()
        self.driver = driver

    def join(self, runtime: Any, nranks: int, rank: int, unique_id: bytes) -> Any:
        assert nranks == 1, "the driver stand-in has one rank"
        return FakeComm(rank, nranks, None)

    def _copy(self, send: int, recv: int, nbytes: int) -> None:
        (src, so), (dst, do) = self.driver._find(send, nbytes), self.driver._find(recv, nbytes)
        dst.data[do : do + nbytes] = src.data[so : so + nbytes]

    def all_reduce(self, comm, send, recv, count, dtype, op, stream) -> None:
        super().all_reduce(comm, send, recv, count, dtype, op, stream)
        self._copy(send, recv, count * ITEMSIZE[dtype])

    def all_gather(self, comm, send, recv, count, dtype, stream) -> None:
        super().all_gather(comm, send, recv, count, dtype, stream)
        self._copy(send, recv, count * ITEMSIZE[dtype])

    def broadcast(self, comm, send, recv, count, dtype, root, stream) -> None:
        super().broadcast(comm, send, recv, count, dtype, root, stream)
        self._copy(send, recv, count * ITEMSIZE[dtype])


class StuckNccl(FakeNccl):
    """Ranks that join and are never ready: every join held mid-way, as NCCL's is by a peer lost
    after the bootstrap began."""

    def ready(self, comm: FakeComm) -> bool:
        super().ready(comm)
        return False

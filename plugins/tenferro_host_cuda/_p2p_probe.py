"""``tenferro-host caps --probe-p2p``: prove each ordered device pair's peer path by using it.

Capability flags can lie (IOMMU setups report peer access and drop the writes), so every
ordered pair (dst, src) that the driver says can access each other gets a real
``copy_from_peer`` of a random pattern, checked byte for byte by checksum, and a bandwidth
sample of repeated copies. Status: ``verified`` (data matched; the figure is the sample),
``unsupported`` (the driver reports no access; nothing was copied) or ``failed`` (the copy
raised or the data differed). A figure far below the link's usual rate means the copy was not
on the direct path.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tenferro_host import TenferroError, Tensor, ValidationError

from ._copies import copy_from_peer
from ._device import query
from ._driver import check, drv
from ._peer import can_access_peer, link_attributes, require_peer_pair
from ._runtime import CudaRuntime

#: Bytes of one probe copy and how many timed copies make the bandwidth sample.
DEFAULT_NBYTES = 64 << 20
DEFAULT_REPEATS = 10

CopyFn = Callable[[Any, Any, Tensor], Tensor]


@dataclass(frozen=True)
class PeerProbe:
    """The outcome of probing one ordered pair: ``dst`` reading ``src``'s memory."""

    dst: int
    src: int
    dst_uuid: str
    src_uuid: str
    status: str
    gbps: float | None
    nbytes: int
    detail: str
    link: dict[str, int | None]

    def as_dict(self) -> dict[str, Any]:
        """Plain values for ``caps --json`` (its ``p2p`` list)."""
        return asdict(self)


def _digest(data: np.ndarray) -> str:
    return hashlib.blake2b(data.tobytes(), digest_size=16).hexdigest()


def probe_pair(
    host: Any,
    dst: int,
    src: int,
    *,
    nbytes: int | None = None,
    repeats: int | None = None,
    copy: CopyFn = copy_from_peer,
) -> PeerProbe:
    """Probe the ordered pair ``(dst, src)`` with fresh runtimes on both devices.

    The same GPU twice is a typed "not a peer pair" error. ``copy`` is the copy under test
    (``copy_from_peer``; tests pass a faulty one to see the probe catch it).
    """
    nbytes = DEFAULT_NBYTES if nbytes is None else nbytes
    repeats = DEFAULT_REPEATS if repeats is None else repeats
    if nbytes <= 0 or nbytes % 4:
        raise ValidationError(
            f"nbytes must be a positive multiple of 4, got {nbytes}",
            argument="nbytes",
            op="caps --probe-p2p",
        )
    require_peer_pair(dst, src, "caps --probe-p2p")
    dst_info, src_info = query(dst), query(src)
    link = link_attributes(dst, src)

    def result(status: str, gbps: float | None, detail: str) -> PeerProbe:
        return PeerProbe(
            dst, src, str(dst_info.uuid), str(src_info.uuid), status, gbps, nbytes, detail, link
        )

    if not can_access_peer(dst, src):
        return result(
            "unsupported", None, f"the driver reports no peer access from cuda:{dst} to cuda:{src}"
        )
    src_rt, dst_rt = CudaRuntime(src, host), CudaRuntime(dst, host)
    try:
        wrong, seconds = _copy_and_time(src_rt, dst_rt, nbytes, repeats, copy)
    except TenferroError as exc:
        return result("failed", None, f"{type(exc).__name__}: {exc}")
    finally:
        src_rt.close()
        dst_rt.close()
    if wrong:
        return result(
            "failed",
            None,
            f"checksum mismatch: {wrong} of {nbytes} bytes differ after the copy "
            "reported success (writes dropped or misrouted)",
        )
    gbps = repeats * nbytes / seconds / 1e9
    return result("verified", gbps, f"checksum matched; {repeats} copies of {nbytes / 2**20:g} MiB")


def _copy_and_time(
    src_rt: CudaRuntime, dst_rt: CudaRuntime, nbytes: int, repeats: int, copy: CopyFn
) -> tuple[int, float]:
    """Bytes that differ after one checked copy of a random pattern, then the seconds that
    ``repeats`` more copies take (skipped when the check already failed)."""
    pattern = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    with src_rt.session() as s_src, dst_rt.session() as s_dst:
        source = src_rt.upload(pattern.view(np.uint32))
        got = copy(s_src, s_dst, source).download().view(np.uint8)
        if _digest(got) != _digest(pattern):
            return int(np.count_nonzero(got != pattern)), 0.0
        dst_rt.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            copy(s_src, s_dst, source)
        dst_rt.synchronize()
        return 0, time.perf_counter() - start


def probe_p2p(
    host: Any, *, nbytes: int | None = None, repeats: int | None = None
) -> tuple[list[PeerProbe], str]:
    """Probe every ordered pair of this process's CUDA devices; ``(probes, summary line)``."""
    count = int(check(drv().cuDeviceGetCount(), "cuDeviceGetCount"))
    pairs = [(dst, src) for dst in range(count) for src in range(count) if dst != src]
    if not pairs:
        return [], (
            f"{count} CUDA device(s): no ordered device pairs to probe (peer copies need two GPUs)"
        )
    probes = [probe_pair(host, dst, src, nbytes=nbytes, repeats=repeats) for dst, src in pairs]
    verified = sum(p.status == "verified" for p in probes)
    return probes, f"{count} CUDA devices: {verified} of {len(pairs)} ordered pairs verified"


__all__ = ["DEFAULT_NBYTES", "DEFAULT_REPEATS", "PeerProbe", "probe_p2p", "probe_pair"]

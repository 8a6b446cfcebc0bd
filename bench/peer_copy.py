"""Copies between runtimes against the bare driver copy they are built on, as bandwidth ratios.

- same device: ``tf.cuda.copy_from_same_device`` (two runtimes of GPU 0) against a plain D2D
  ``cuMemcpyAsync`` on the destination runtime's stream into a preallocated buffer;
- two GPUs (when there are two and cuda:1 can access cuda:0): ``tf.cuda.copy_from_peer``
  against ``cuMemcpyPeerAsync`` with the pool access already granted (the first tenferro copy
  grants it; without it the driver stages the copy through the host).

Interleaved in one process: each round times a batch of copies of every variant in turn, on the
destination stream, synchronizing that stream once per batch. tenferro's figure includes what
every copy costs it: the output allocation from the pool, the events and the lease. The report
gives GB/s medians over rounds and the ratios (tenferro / driver; the target is >= 0.95).

    python bench/peer_copy.py [--mib 256] [--rounds 20] [--batch 8] [--json PATH]

``--json`` defaults to ``$OUT/peer_copy.json`` when ``$OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tenferro_host_cuda._driver import drv

import tenferro_host as tf
from tenferro_host.benchmarks.kernel_rows import wall_seconds

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import interleaved, print_rows


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB per copy (default 256)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8, help="copies per timed batch")
    out = os.environ.get("OUT")
    parser.add_argument("--json", default=os.path.join(out, "peer_copy.json") if out else None)
    return parser.parse_args()


def gbps_medians(
    variants: dict[str, Callable[[], Any]],
    sync: Callable[[], None],
    nbytes: int,
    rounds: int,
    batch: int,
) -> dict[str, float]:
    """One warm-up batch each, then ``rounds`` interleaved batches; median GB/s per variant."""

    def gbps(fn: Callable[[], Any], batch: int, sync: Callable[[], None]) -> float:
        return nbytes / wall_seconds(fn, batch, sync) / 1e9

    return interleaved(variants, rounds, gbps, batch, dict.fromkeys(variants, sync))


def stream_sync(rt: Any) -> Callable[[], None]:
    return lambda: rt.ok(drv().cuStreamSynchronize(rt.stream_handle), "cuStreamSynchronize")


def same_device(host: tf.Host, nbytes: int, opts: argparse.Namespace) -> dict[str, float]:
    driver = drv()
    src_rt: Any = host.backend("cuda:0")
    dst_rt: Any = host.new_backend("cuda:0")
    src = src_rt.upload(np.ones(nbytes // 4, np.float32))
    buf = dst_rt.empty(tf.float32, (nbytes // 4,))
    src_ptr, buf_ptr = src.storage.ptr, buf.storage.ptr

    def bare() -> None:
        with dst_rt.primary:
            dst_rt.ok(
                driver.cuMemcpyAsync(buf_ptr, src_ptr, nbytes, dst_rt.stream_handle),
                "cuMemcpyAsync",
            )

    with src_rt.session() as s_src, dst_rt.session() as s_dst:
        variants = {
            "same_device/cuMemcpyAsync": bare,
            "same_device/copy_from_same_device": lambda: tf.cuda.copy_from_same_device(
                s_src, s_dst, src
            ),
        }
        return gbps_medians(variants, stream_sync(dst_rt), nbytes, opts.rounds, opts.batch)


def peer(host: tf.Host, nbytes: int, opts: argparse.Namespace) -> dict[str, float] | str:
    driver = drv()
    count = int(driver.cuDeviceGetCount()[1])
    if count < 2:
        return f"skipped: {count} CUDA device(s), the peer rows need two"
    if not tf.cuda.can_access_peer(1, 0):
        return "skipped: cuda:1 cannot access cuda:0 (copy_from_peer raises PeerAccessError)"
    src_rt: Any = host.new_backend("cuda:0")
    dst_rt: Any = host.new_backend("cuda:1")
    src = src_rt.upload(np.ones(nbytes // 4, np.float32))
    buf = dst_rt.empty(tf.float32, (nbytes // 4,))
    src_ptr, buf_ptr = src.storage.ptr, buf.storage.ptr
    dst_ctx, src_ctx = dst_rt.primary.handle, src_rt.primary.handle

    def bare() -> None:
        dst_rt.ok(
            driver.cuMemcpyPeerAsync(
                buf_ptr, dst_ctx, src_ptr, src_ctx, nbytes, dst_rt.stream_handle
            ),
            "cuMemcpyPeerAsync",
        )

    with src_rt.session() as s_src, dst_rt.session() as s_dst:
        tf.cuda.copy_from_peer(s_src, s_dst, src)  # grants cuda:1 access to the source pool
        variants = {
            "peer/cuMemcpyPeerAsync (access granted)": bare,
            "peer/copy_from_peer": lambda: tf.cuda.copy_from_peer(s_src, s_dst, src),
        }
        return gbps_medians(variants, stream_sync(dst_rt), nbytes, opts.rounds, opts.batch)


def main() -> int:
    opts = arguments()
    nbytes = opts.mib << 20
    host = tf.Host()
    gbps = same_device(host, nbytes, opts)
    peer_rows = peer(host, nbytes, opts)
    ratios = {
        "same_device: copy_from_same_device / cuMemcpyAsync": gbps[
            "same_device/copy_from_same_device"
        ]
        / gbps["same_device/cuMemcpyAsync"]
    }
    if isinstance(peer_rows, dict):
        gbps.update(peer_rows)
        ratios["peer: copy_from_peer / cuMemcpyPeerAsync"] = (
            gbps["peer/copy_from_peer"] / gbps["peer/cuMemcpyPeerAsync (access granted)"]
        )
    rt: Any = host.backend("cuda:0")
    print(
        f"copies of {opts.mib} MiB, median GB/s of {opts.rounds} rounds x {opts.batch} "
        f"({rt.device_info.name}, python {sys.version.split()[0]})"
    )
    print_rows(gbps, 44, "{:8.1f} GB/s")
    print_rows(ratios, 44, "{:8.3f}x")
    if isinstance(peer_rows, str):
        print(f"  peer: {peer_rows}")
    if opts.json:
        report = {
            "nbytes": nbytes,
            "rounds": opts.rounds,
            "batch": opts.batch,
            "device": rt.device_info.name,
            "gbps": gbps,
            "ratios": ratios,
            "peer": "measured" if isinstance(peer_rows, dict) else peer_rows,
        }
        with open(opts.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

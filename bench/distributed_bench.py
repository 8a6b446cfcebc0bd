"""Cost of a remote op call on a local Ray cluster, against Ray's bare actor call.

One process starts a local cluster (2 CPUs, 2 logical GPUs), a pool of two CPU host actors and a
bare Ray actor on the same node. Interleaved rounds time, per call and round trip included:
``ray_bare`` (a bare actor method taking the same two handles and returning one; ``ray_bare_timed``
the same waited with a timeout, as every pool call is), ``remote_op``
(``RemoteHost.run`` of ``ext_add_kernel.add`` on two handles the actor holds), ``remote_op_ray``
(the same through ``actor.run.remote`` without the pool's wrapper) and ``local_op`` (the op run in
this process: what the remote call adds to). The target: ``remote_op`` <= 1.2x ``ray_bare``.
Then an op mapped over both actors, results gathered and checked.

    python bench/distributed_bench.py [--rounds 20] [--batch 50] [--json PATH]
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import ray

import tenferro_host as tf
from tenferro_host.distributed import HostPool

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import arguments, interleaved_medians, write_json

OP = "ext_add_kernel.add"
N = 16


class Bare:
    """Ray's bare actor call: takes the op's arguments, returns the first."""

    def call(self, op: str, *args: object) -> object:
        return args[0]


def ray_children() -> set[int]:
    """The live processes this one started that are Ray's (GCS, raylet, monitors)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"ray" in command:
            found.add(int(stat.parent.name))
    return found


def start_local_cluster() -> float:
    """Start a local Ray cluster of 2 CPUs and 2 logical GPUs (no dashboard, no usage report);
    the seconds it took. Ray gives a starting node 30 s to register, which a machine under heavy
    load can miss once: then the processes of that start are ended and it tries once more."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options = {
        "num_cpus": 2,
        "num_gpus": 2,
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "ERROR",
        "object_store_memory": 100 << 20,
    }
    t0 = time.perf_counter()
    try:
        ray.init(**options)
    except Exception as exc:
        if "timed out during startup" not in str(exc):
            raise
        ray.shutdown()  # knows nothing of a node that never registered: end what it started
        for pid in ray_children():
            with contextlib.suppress(ProcessLookupError, ChildProcessError):  # gone already
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        ray.init(**options)
    return time.perf_counter() - t0


def main() -> int:
    opts = arguments(__doc__)
    t0 = time.perf_counter()
    started = start_local_cluster()
    try:
        with HostPool.start("cpu", actors=2, num_gpus=1) as pool:
            pool_s = time.perf_counter() - t0 - started
            host = pool[0]
            x = np.arange(N, dtype=np.float32)
            a, b = host.upload(x, x)
            bare = ray.remote(num_gpus=0, num_cpus=0)(Bare).remote()
            ray.get(bare.call.remote(OP, a, b))
            local = tf.Host()
            cpu = local.backend("cpu")
            la, lb = cpu.upload(x), cpu.upload(x)
            variants = {
                "ray_bare": lambda: ray.get(bare.call.remote(OP, a, b)),
                "ray_bare_timed": lambda: ray.get(bare.call.remote(OP, a, b), timeout=300),
                "remote_op": lambda: host.run(OP, a, b),
                "remote_op_ray": lambda: ray.get(host.actor.run.remote(OP, a, b)),
                "local_op": lambda: local.run(OP, la, lb),
            }
            medians = interleaved_medians(variants, opts.rounds, opts.batch, lambda: None)
            ratios = {
                "remote_op / ray_bare": medians["remote_op"] / medians["ray_bare"],
                "remote_op_ray / ray_bare": medians["remote_op_ray"] / medians["ray_bare"],
                "remote_op / ray_bare_timed": medians["remote_op"] / medians["ray_bare_timed"],
            }
            print(f"cluster start {started:.1f} s, pool of 2 actors {pool_s:.1f} s")
            for name, us in medians.items():
                print(f"{name:>14}: {us:9.1f} us per call")
            for name, ratio in ratios.items():
                print(f"{name:>28}: {ratio:.3f}x (target <= 1.2x)")

            rng = np.random.default_rng(0)
            shards = [(rng.standard_normal(1 << 12).astype(np.float32),) * 2 for _ in range(8)]
            handles = pool.map(OP, shards)
            gathered = pool.gather(handles)
            correct = all(
                np.allclose(g, s[0] + s[1]) for g, s in zip(gathered, shards, strict=True)
            )
            owners = sorted({h.owner for h in handles})
            print(
                f"map over {len(owners)} actors, {len(shards)} shards gathered: "
                f"{'correct' if correct else 'WRONG'}"
            )
            write_json(opts.json, medians, {**ratios, "map_correct": float(correct)})
    finally:
        ray.shutdown()
    return 0 if correct else 1


if __name__ == "__main__":
    raise SystemExit(main())

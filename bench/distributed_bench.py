"""Cost of a remote op call on a local Ray cluster, against Ray's bare actor call.

One process starts a local cluster on loopback (2 CPUs, 2 logical GPUs; the tests' own,
``tests/support/ray_cluster.py``), a pool of two CPU host actors and a
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

import sys
import time
from pathlib import Path

import numpy as np

# PYTHONSAFEPATH (scripts/gpu-tests) omits the script's folder; the cluster is the tests' own.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]
from launch_timing import arguments, interleaved_medians, write_json  # noqa: E402
from support.ray_cluster import start_local_cluster  # noqa: E402  (sets Ray's environment)

# isort: split
import ray  # noqa: E402  (after support.ray_cluster: Ray reads its environment at import)

import tenferro_host as tf  # noqa: E402
from tenferro_host.distributed import HostPool  # noqa: E402

OP = "ext_add_kernel.add"
N = 16


class Bare:
    """Ray's bare actor call: takes the op's arguments, returns the first."""

    def call(self, op: str, *args: object) -> object:
        return args[0]


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

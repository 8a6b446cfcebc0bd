"""Cost of a remote op call on a local Ray cluster, against a plain Ray actor doing the same work.

One process starts a local cluster on loopback (2 CPUs, 2 logical GPUs; the tests' own,
``tests/support/ray_cluster.py``), a pool of two CPU host actors and a plain Ray actor on the
same node. The plain actor (``NumpyActor``) holds the same two float32 arrays in a dict; its
``add`` computes ``np.add``, keeps the result under a new key and answers the key, and the driver
frees its keys in batches (``free``): an add, the result kept, a small handle back, the result
freed, as a host actor does (where the tensors live while their refs do, and the releaser sends
out-of-scope keys back in batches).

Rows, per call, for N = 4096 and N = 16 float32 elements (``ext_add_kernel.add``; the numpy work
is a few µs at 4096, nothing at 16):

* ``seq_ours_N``: ``ray.get(host.remote(OP, a, b))``, one call at a time, round trip included
  (the result's ref dropped at once: the releaser's batches run in the timed region);
  ``seq_ray_N``: ``ray.get(actor.add.remote(...))``, its keys freed by one batched ``free``
  per timed batch (sent, not waited, as the releaser sends its batches).
* ``pipe_ours_N``: 3,000 calls submitted, ``ray.get`` of all, the refs dropped; per call.
  ``pipe_ray_N``: the same calls on the plain actor, one ``free`` of the 3,000 keys after.
  Several waves per timed batch, so each wave's freeing lands in the next wave's time; the
  batch's last wave is freed in the drain between batches (outside every timing, for both).
* ``local_op_N``: the op run in this process (what the remote call adds to).

Ours and the plain actor run in interleaved rounds (medians), with a drain between batches
(every freed result gone from both actors). Targets: sequential <= 1.2x, pipelined <= 1.3x the
plain actor. Then an op mapped over both actors, gathered and checked, and every ref dropped:
a host actor still holding tensors a few seconds later is a leak, and the run fails (exit 1).

    python bench/distributed_bench.py [--rounds 10] [--batch 50] [--json PATH]
"""

from __future__ import annotations

import gc
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# PYTHONSAFEPATH (scripts/gpu-tests) omits the script's folder; the cluster is the tests' own.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]
from launch_timing import arguments, interleaved_medians  # noqa: E402
from support.ray_cluster import start_local_cluster  # noqa: E402  (sets Ray's environment)

# isort: split
import ray  # noqa: E402  (after support.ray_cluster: Ray reads its environment at import)

import tenferro_host as tf  # noqa: E402
from tenferro_host.benchmarks.report import target_table, verdict  # noqa: E402
from tenferro_host.distributed import HostPool, TensorHandle  # noqa: E402

OP = "ext_add_kernel.add"
#: The element counts timed: the targets' size first (a small but real add), then 16.
SIZES = (1 << 12, 16)
#: Calls in flight in a pipelined wave, and waves per timed batch.
IN_FLIGHT = 3000
WAVES = 3
SEQ_BOUND = 1.2
PIPE_BOUND = 1.3
#: Seconds the actors get to drop every tensor once the driver dropped every ref.
LEAK_WAIT_S = 3.0


class NumpyActor:
    """The plain Ray actor: numpy arrays in a dict, results kept under new keys until freed."""

    def __init__(self) -> None:
        self.held: dict[Any, np.ndarray] = {}
        self.keys = itertools.count()

    def put(self, name: str, array: np.ndarray) -> None:
        self.held[name] = array

    def add(self, x: str, y: str) -> int:
        key = next(self.keys)
        self.held[key] = np.add(self.held[x], self.held[y])
        return key

    def free(self, keys: list[int]) -> None:
        for key in keys:
            self.held.pop(key, None)

    def count(self) -> int:
        return len(self.held)


def wait_until(check: Any, within_s: float) -> bool:
    """Whether ``check()`` came true within ``within_s`` (looked at every 5 ms)."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def measure(pool: HostPool, plain: Any, rounds: int, batch: int) -> dict[str, float]:
    """Every row's median µs per call (pipelined rows per call of a wave)."""
    host = pool[0]
    local = tf.Host()
    cpu = local.backend("cpu")
    unfreed: list[int] = []  # the plain actor's keys not freed yet

    def seq_plain(x: str, y: str) -> None:
        unfreed.append(ray.get(plain.add.remote(x, y)))
        if len(unfreed) >= batch:  # one batched free per timed batch
            plain.free.remote(unfreed.copy())
            unfreed.clear()

    def pipe_ours(a: Any, b: Any) -> None:
        refs = [host.remote(OP, a, b) for _ in range(IN_FLIGHT)]
        ray.get(refs)
        del refs

    def pipe_plain(x: str, y: str) -> None:
        keys = ray.get([plain.add.remote(x, y) for _ in range(IN_FLIGHT)])
        plain.free.remote(keys)

    seq: dict[str, Any] = {}
    pipe: dict[str, Any] = {}
    inputs = 0
    for n in SIZES:
        x = np.arange(n, dtype=np.float32)
        a, b = host.upload(x, x)
        x_name, y_name = f"x{n}", f"y{n}"
        ray.get([plain.put.remote(x_name, x), plain.put.remote(y_name, x)])
        la, lb = cpu.upload(x), cpu.upload(x)
        inputs += 2
        seq[f"seq_ours_{n}"] = lambda a=a, b=b: ray.get(host.remote(OP, a, b))
        seq[f"seq_ray_{n}"] = lambda x=x_name, y=y_name: seq_plain(x, y)
        seq[f"local_op_{n}"] = lambda la=la, lb=lb: local.run(OP, la, lb)
        pipe[f"pipe_ours_{n}"] = lambda a=a, b=b: pipe_ours(a, b)
        pipe[f"pipe_ray_{n}"] = lambda x=x_name, y=y_name: pipe_plain(x, y)

    def drain() -> None:
        """Both actors back to their inputs only (outside the timed region)."""
        if unfreed:
            plain.free.remote(unfreed.copy())
            unfreed.clear()
        gc.collect()
        if not wait_until(lambda: host.held() <= inputs, 10.0):
            raise RuntimeError(f"host actor still holds {host.held()} tensors after a drain")
        if ray.get(plain.count.remote()) != inputs:
            raise RuntimeError("the plain actor kept results past its free")

    medians = interleaved_medians(seq, rounds, batch, drain)
    per_wave = interleaved_medians(pipe, rounds, WAVES, drain)
    medians.update({name: us / IN_FLIGHT for name, us in per_wave.items()})
    return medians


def map_gather(pool: HostPool) -> tuple[bool, int]:
    """An op mapped over the pool, gathered and checked; whether correct, and the actors used."""
    rng = np.random.default_rng(0)
    shards = [(rng.standard_normal(1 << 12).astype(np.float32),) * 2 for _ in range(8)]
    refs = pool.map(OP, shards)
    gathered = pool.gather(refs)
    correct = all(np.allclose(g, s[0] + s[1]) for g, s in zip(gathered, shards, strict=True))
    return correct, len({TensorHandle.parse(a).owner for a in ray.get(refs)})


def leaked(pool: HostPool) -> list[int]:
    """Tensors each actor still holds once every ref is dropped (all zero: no leak)."""
    gc.collect()
    wait_until(lambda: all(h.held() == 0 for h in pool), LEAK_WAIT_S)
    return [h.held() for h in pool]


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    opts = arguments(__doc__)
    load_before = loadavg()
    t0 = time.perf_counter()
    started = start_local_cluster()
    try:
        with HostPool.start("cpu", actors=2, num_gpus=1) as pool:
            pool_s = time.perf_counter() - t0 - started
            plain = ray.remote(num_cpus=0, num_gpus=0)(NumpyActor).remote()
            medians = measure(pool, plain, opts.rounds, opts.batch)
            correct, owners = map_gather(pool)
            held = leaked(pool)
    finally:
        ray.shutdown()
    load_after = loadavg()

    ratios, targets = {}, []
    for n in SIZES:
        for mode, label, bound in (
            ("seq", f"sequential add, {n} float32, vs a plain Ray actor", SEQ_BOUND),
            ("pipe", f"{IN_FLIGHT} adds in flight, {n} float32, vs a plain Ray actor", PIPE_BOUND),
        ):
            ratio = medians[f"{mode}_ours_{n}"] / medians[f"{mode}_ray_{n}"]
            ratios[f"{mode}_ours_{n} / {mode}_ray_{n}"] = ratio
            targets.append(verdict(label, ratio, "<=", bound))

    print(f"cluster start {started:.1f} s, pool of 2 actors {pool_s:.1f} s")
    print(f"load average {load_before} before, {load_after} after")
    for name, us in medians.items():
        print(f"{name:>16}: {us:9.1f} us per call")
    for name, ratio in ratios.items():
        print(f"{name:>30}: {ratio:.3f}x")
    print("\n".join(target_table(targets)))
    print(
        f"map over {owners} actors, 8 shards gathered: {'correct' if correct else 'WRONG'}; "
        f"tensors held after every ref dropped: {held} ({'none' if not any(held) else 'LEAK'})"
    )
    if opts.json:
        doc = {
            "medians_us": medians,
            "ratios": {**ratios, "map_correct": float(correct)},
            "targets": targets,
            "held_after_drop": held,
            "loadavg": {"before": load_before, "after": load_after},
        }
        with open(opts.json, "w") as fh:
            json.dump(doc, fh, indent=2)
    return 0 if correct and not any(held) else 1


if __name__ == "__main__":
    raise SystemExit(main())

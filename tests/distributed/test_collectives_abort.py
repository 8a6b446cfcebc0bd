"""Collectives that never hang, on a real Ray cluster of two CPU actors and the stand-in NCCL
(tests/support/fake_nccl.py): a rank that never joins is a CallTimeoutError naming it, a rank
killed mid-join its HostActorDiedError, a failed collective its own error; each time the other
rank's communicator is aborted through its actor's ``control`` concurrency group while its main
thread is blocked, the actor answers again, and a fresh ``init_collectives`` works without a new
pool.

One cluster for the module (tests/support/ray_cluster.py, on loopback only), a fresh pool per
test. Every wait is bounded; the bounds say "no hang", never how fast.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

# It sets the environment Ray reads at import, then imports Ray: before anything else does.
pytest.importorskip("support.ray_cluster", reason="needs Ray: the [ray] extra")

# isort: split
import ray
from support.fake_nccl import appears

import tenferro_host as tf
from tenferro_host.distributed import HostPool

STAND_IN = "support.fake_nccl:FakeNccl"
STUCK = "support.fake_nccl:StuckNccl"
#: The bound of every wait here: far beyond any timeout the tests set, so only a hang reaches it.
NO_HANG_S = 30.0


@pytest.fixture
def pool(cluster):
    with HostPool.start("cpu", actors=2, num_gpus=1, timeout_s=120) as p:
        yield p


def _new_dirs(cluster: Path, before: set[Path]) -> list[Path]:
    return sorted(set(cluster.iterdir()) - before)


def _abort(host, unique_id: bytes) -> str:
    """What the pool sends on a failure: collective_abort in the actor's control group."""
    ref = host.actor.collective_abort.options(concurrency_group="control").remote(unique_id)
    return str(ray.get(ref, timeout=NO_HANG_S))


def test_a_rank_that_never_joins_is_a_timeout_naming_it_and_the_other_is_freed(pool, cluster):
    # Rank 1's main thread is held by a join nobody else makes: its init_collectives call
    # waits behind it, so rank 1 never joins.
    busy_id = pool[1].submit("collective_unique_id", STAND_IN).result(NO_HANG_S)
    busy = pool[1].submit("collective_init", busy_id, 2, 0, STAND_IN)
    assert appears(Path(busy_id.decode()) / "rank0")
    before = set(cluster.iterdir())
    started = time.monotonic()
    with pytest.raises(tf.CallTimeoutError) as info:
        pool.init_collectives(binding=STAND_IN, timeout_s=2)
    assert time.monotonic() - started < 2 + NO_HANG_S
    error = info.value
    assert isinstance(error, TimeoutError) and error.timeout_s == 2
    assert error.actor == pool[1].id
    assert f"rank 1 ({pool[1].id}) did not finish within 2 s" in error.message
    assert "rank 0" not in error.message  # only the rank that did not finish is named
    (joined,) = _new_dirs(cluster, before)
    assert (joined / "rank0").exists() and (joined / "aborted-rank0").exists()
    assert pool[0].held(timeout_s=NO_HANG_S) == 0  # rank 0 answers again

    # The held actor is freed the same way; its queued join of the failed id then refuses.
    assert _abort(pool[1], busy_id) == "in flight"
    with pytest.raises(tf.SessionClosedError, match="join was aborted"):
        busy.result(NO_HANG_S)
    assert pool[1].held(timeout_s=NO_HANG_S) == 0  # runs after that queued join
    assert not (joined / "rank1").exists()

    before = set(cluster.iterdir())
    pool.init_collectives(binding=STAND_IN, timeout_s=NO_HANG_S)
    (fresh,) = _new_dirs(cluster, before)
    assert sorted(p.name for p in fresh.iterdir()) == ["rank0", "rank1"]


def test_a_rank_killed_mid_join_is_its_typed_error_and_the_other_rank_is_freed(pool, cluster):
    before = set(cluster.iterdir())
    failure: list[BaseException] = []

    def init() -> None:
        try:  # each rank gives up on its own only after 300 s: the abort frees rank 0
            pool.init_collectives(binding=STUCK, timeout_s=300)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            failure.append(exc)

    caller = threading.Thread(target=init, daemon=True)
    caller.start()
    deadline = time.monotonic() + NO_HANG_S
    while len(_new_dirs(cluster, before)) != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    (joined,) = _new_dirs(cluster, before)
    assert appears(joined / "rank0") and appears(joined / "rank1")  # both mid-join
    dead = pool[1].id
    ray.kill(pool[1].actor)
    caller.join(NO_HANG_S)
    assert not caller.is_alive()
    (error,) = failure
    assert isinstance(error, tf.HostActorDiedError) and error.actor == dead
    note = error.__notes__[-1]
    assert "every rank's communicator was aborted" in note
    assert f"rank 1 ({dead}): its actor died" in note
    assert (joined / "aborted-rank0").exists()
    assert pool[0].held(timeout_s=NO_HANG_S) == 0

    pool[1].restart(timeout_s=NO_HANG_S)  # the pool keeps its place; no new pool needed
    pool.init_collectives(binding=STAND_IN, timeout_s=NO_HANG_S)


def test_a_failed_collective_aborts_every_ranks_communicator(pool, cluster):
    before = set(cluster.iterdir())
    pool.init_collectives(binding=STAND_IN, timeout_s=NO_HANG_S)
    (joined,) = _new_dirs(cluster, before)
    handles = [h.upload(np.ones(2, np.float32)) for h in pool]
    with pytest.raises(tf.UnsupportedError, match="run on CUDA runtimes") as info:
        pool.collective("all_reduce", handles, timeout_s=NO_HANG_S)  # CPU runtimes refuse
    assert "every rank's communicator was aborted" in info.value.__notes__[-1]
    assert (joined / "aborted-rank0").exists() and (joined / "aborted-rank1").exists()
    with pytest.raises(tf.SessionClosedError, match="closed by an abort"):
        pool.collective("broadcast", handles, timeout_s=NO_HANG_S)
    pool.init_collectives(binding=STAND_IN, timeout_s=NO_HANG_S)

"""A real two-actor Ray cluster on this machine: placement, ops, typed errors, a killed actor,
collectives bootstrapped through the pool, and a shutdown that leaves no process behind.

One cluster for the module (starting Ray costs seconds; tests/support/ray_cluster.py, on loopback
only): 2 CPUs and 2 logical GPUs, one CPU and one WebGPU actor, each given a GPU by Ray. Nothing
here waits without a bound.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

# It sets the environment Ray reads at import, then imports Ray: before anything else does.
pytest.importorskip("support.ray_cluster", reason="needs Ray: the [ray] extra")

# isort: split
import ray
from support.ray_cluster import LOOPBACK, listening_sockets, ray_children, start_local_cluster

import tenferro_host as tf
from tenferro_host.distributed import HostPool

TESTS = Path(__file__).resolve().parents[1]
STAND_IN = "support.fake_nccl:FakeNccl"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    saved = dict(os.environ)
    # Workers import the stand-in NCCL from tests/support and inherit this environment.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), saved.get("PYTHONPATH")]))
    os.environ["FAKE_NCCL_DIR"] = str(tmp_path_factory.mktemp("fake-nccl"))
    start_local_cluster()
    try:
        yield Path(os.environ["FAKE_NCCL_DIR"])
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def pool(cluster):
    with HostPool.start(["cpu", "webgpu"], num_gpus=1) as p:
        yield p


def test_every_process_of_the_test_cluster_listens_on_loopback_only(pool):
    sockets = listening_sockets(ray_children() | {int(h.id.split("/")[1]) for h in pool})
    assert len({pid for _, _, pid in sockets}) >= 3  # GCS, raylet, the actors ...
    assert [s for s in sockets if s[0] not in LOOPBACK] == []
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")


def test_each_actor_owns_its_backend_and_its_own_logical_gpu(pool):
    caps = pool.caps()
    assert [c.backend for c in caps] == ["cpu:0", "webgpu:0"]
    assert sorted(c.visible_devices for c in caps) == ["0", "1"]
    assert {c.node_id for c in caps} == {ray.get_runtime_context().get_node_id()}
    assert len({h.id for h in pool}) == 2


def test_an_op_mapped_over_both_actors_gives_the_right_results(pool):
    rng = np.random.default_rng(0)
    shards = [(rng.standard_normal(64).astype(np.float32),) * 2 for _ in range(4)]
    handles = pool.map("ext_add_kernel.add", shards)
    assert [h.owner for h in handles] == [pool[0].id, pool[1].id] * 2
    for got, (x, _) in zip(pool.gather(handles), shards, strict=True):
        np.testing.assert_allclose(got, x + x, rtol=1e-6)


def test_an_op_runs_on_handles_the_actor_keeps(pool):
    for host in pool:
        a = host.upload(np.arange(4, dtype=np.float32))
        out = host.run("ext_add_kernel.add", a, a)
        assert out.owner == host.id and out.backend == host.backend
        np.testing.assert_array_equal(host.download(out), [0, 2, 4, 6])
        host.free(a, out)


def test_work_is_placed_by_the_actors_caps(pool):
    assert [h.backend for h in pool.where(op="linalg.qr")] == ["cpu:0"]  # no WebGPU variant
    assert len(pool.where(op="ext_add_kernel.add")) == 2
    with pytest.raises(tf.UnsupportedError, match="no actor of the pool matches"):
        pool.where(op="ext_add_kernel.add", kind="cuda")
    with pytest.raises(tf.UnsupportedError, match="no actor of the pool matches"):
        pool.where(arch="sm_90")


def test_what_the_cluster_lacks_is_refused_at_once(cluster):
    with pytest.raises(tf.UnsupportedError, match=r"tenferro\.arch\.sm_90"):
        HostPool.start("cpu", actors=1, arch="sm_90")
    with pytest.raises(tf.UnsupportedError, match="need 3 of Ray resource 'GPU'"):
        HostPool.start("cpu", actors=3, num_gpus=1)
    with pytest.raises(tf.ValidationError, match="pass 'cuda', not 'cuda:1'"):
        HostPool.start("cuda:1")


def test_an_actor_that_cannot_make_its_runtime_fails_start_with_that_typed_error(cluster):
    with pytest.raises(tf.UnsupportedError, match="backend 'rocm' is unavailable") as info:
        HostPool.start(["rocm"])
    assert info.value.backend == "rocm"


def test_a_typed_error_arrives_as_itself(pool):
    host = pool[0]
    a = host.upload(np.ones(4, np.float32))
    b = host.upload(np.ones(4, np.int32))
    local = tf.Host().backend("cpu")
    with pytest.raises(tf.TenferroError) as expected:
        tf.Host().run(
            "ext_add_kernel.add",
            local.upload(np.ones(4, np.float32)),
            local.upload(np.ones(4, np.int32)),
        )
    with pytest.raises(tf.TenferroError) as got:
        host.run("ext_add_kernel.add", a, b)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)
    fields = {k: v for k, v in got.value.__dict__.items() if k != "__notes__"}
    assert fields == expected.value.__dict__
    assert any(host.id in note for note in got.value.__notes__)


def test_a_handle_sent_to_the_wrong_actor_is_a_foreign_runtime_error(pool):
    a = pool[0].upload(np.ones(2, np.float32))
    with pytest.raises(tf.ForeignRuntimeError, match=f"lives in host actor {pool[0].id}"):
        pool[1].run("ext_add_kernel.add", a, a)


def test_collectives_are_bootstrapped_through_the_pool(pool, cluster):
    pool.init_collectives(binding=STAND_IN)
    (joined,) = [d for d in cluster.iterdir() if d.name.startswith("uid-")]
    ranks = sorted(p.read_text().split()[:2] for p in joined.glob("rank*"))
    assert ranks == [["cpu:0", "2"], ["webgpu:0", "2"]]  # one id, every rank, all at once
    handles = [h.upload(np.ones(2, np.float32)) for h in pool]
    with pytest.raises(tf.UnsupportedError, match="run on CUDA runtimes"):
        pool.collective("all_reduce", handles)


def test_an_actor_that_hangs_times_out_and_one_killed_mid_call_is_a_typed_error(cluster):
    with HostPool.start("cpu") as lone:  # one actor per node: this one
        assert len(lone) == 1
        host = lone[0]
        unique_id = host.submit("collective_unique_id", STAND_IN).result()
        # Joining a two-rank communicator alone blocks in the actor: a call surely mid-run.
        stuck = host.submit("collective_init", unique_id, 2, 0, STAND_IN)
        rank_file = Path(unique_id.decode()) / "rank0"
        deadline = time.monotonic() + 30
        while not rank_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rank_file.exists()
        with pytest.raises(tf.ActorUnavailableError) as timed_out:
            stuck.result(timeout_s=0.2)
        assert timed_out.value.reason == "timed out" and timed_out.value.actor == host.id
        ray.kill(host.actor)
        with pytest.raises(tf.ActorUnavailableError, match="died") as died:
            stuck.result(timeout_s=30)
        assert died.value.reason == "died"
        with pytest.raises(tf.ActorUnavailableError, match="died"):
            host.upload(np.ones(2, np.float32), timeout_s=30)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_shutdown_leaves_no_process_behind(pool):
    ray_processes = ray_children()
    workers = {int(h.id.split("/")[1]) for h in pool}
    assert ray_processes and workers
    pool.shutdown()
    ray.shutdown()
    deadline = time.monotonic() + 30
    while any(map(_alive, ray_processes | workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in ray_processes | workers if _alive(p)]

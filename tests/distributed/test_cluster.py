"""A real two-actor Ray cluster on this machine: results as Ray object refs released by Ray's
reference counting, placement, ops, typed errors, a hung and a killed actor, collectives
bootstrapped through the pool, a pool used by Ray tasks, and a shutdown that leaves no process
behind.

One cluster for the module (conftest.py: on loopback only, tests/support/ray_cluster.py):
one CPU and one WebGPU actor, each given one of its 2 logical GPUs by Ray. Nothing here waits
without a bound.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import numpy as np
import pytest

# It sets the environment Ray reads at import, then imports Ray: before anything else does.
pytest.importorskip("support.ray_cluster", reason="needs Ray: the [ray] extra")

# isort: split
import ray
from support.fake_nccl import appears
from support.ray_cluster import LOOPBACK, listening_sockets, ray_children

import tenferro_host as tf
from tenferro_host.distributed import HostPool, TensorHandle

STAND_IN = "support.fake_nccl:FakeNccl"


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
    refs = pool.map("ext_add_kernel.add", iter(shards), in_flight=1)
    assert all(isinstance(r, ray.ObjectRef) for r in refs)
    owners = [TensorHandle.parse(a).owner for a in ray.get(refs)]  # the actor free first
    assert owners[:2] == [pool[0].id, pool[1].id] and set(owners) == {h.id for h in pool}
    for got, (x, _) in zip(pool.gather(refs), shards, strict=True):
        np.testing.assert_allclose(got, x + x, rtol=1e-6)
    with pytest.raises(tf.ValidationError, match="at least 1"):
        pool.map("ext_add_kernel.add", shards, in_flight=0)


def test_an_op_runs_on_tensors_the_actor_keeps_and_its_result_is_an_object_ref(pool):
    for host in pool:
        a = host.upload(np.arange(4, dtype=np.float32))
        out = host.run("ext_add_kernel.add", a, a)
        handle = TensorHandle.parse(ray.get(out))  # a ref's value: its tensor's address
        assert handle.owner == host.id and handle.backend == host.backend
        np.testing.assert_array_equal(host.download(out), [0, 2, 4, 6])
        host.free(a, out)
        with pytest.raises(tf.SessionClosedError, match="was freed"):
            host.download(handle)


def test_a_ref_is_awaited_and_waited_on_as_any_ray_ref(pool):
    host = pool[0]
    a = host.upload(np.ones(3, np.float32))
    ref = host.remote("ext_add_kernel.add", a, a)  # no wait
    ready, _ = ray.wait([ref], timeout=60)
    assert ready == [ref]

    async def awaited():
        return await ref

    assert TensorHandle.parse(asyncio.run(awaited())).owner == host.id
    np.testing.assert_array_equal(host.download(ref), [2, 2, 2])


def _held_becomes(host, count, within_s=30.0):
    deadline = time.monotonic() + within_s
    while host.held() != count and time.monotonic() < deadline:
        time.sleep(0.05)
    return host.held()


@ray.remote(num_cpus=0)
def _borrow(refs, seconds):
    """A task given refs (nested: Ray passes them as refs, so the task borrows them)."""
    time.sleep(seconds)
    return len(refs)


def test_tensors_live_as_long_as_rays_reference_counting_keeps_their_refs(pool):
    host = pool[0]
    gc.collect()  # earlier tests' refs: out of scope, released in the background
    held = _held_becomes(host, 0)
    a = host.upload(np.ones(2, np.float32))
    out = host.run("ext_add_kernel.add", a, a)
    handle = ray.get(out)
    assert host.held() == held + 2
    del a
    assert _held_becomes(host, held + 1) == held + 1  # a went out of scope, out did not
    borrowed = _borrow.remote([out], 1.5)
    del out
    gc.collect()
    time.sleep(0.5)
    np.testing.assert_array_equal(host.download(handle), [2, 2])  # the task still holds it
    assert ray.get(borrowed, timeout=60) == 1
    assert _held_becomes(host, held) == held
    with pytest.raises(tf.SessionClosedError, match="went out of scope"):
        host.download(handle)


@ray.remote(num_cpus=0)
def _driver(pool, x):
    """A Ray task using a pool it was given: its own calls, its own refs."""
    host = pool[0]
    return host.download(host.run("ext_add_kernel.add", host.upload(x), host.upload(x)))


def test_several_drivers_use_one_pool(pool):
    x = np.arange(5, dtype=np.float32)
    gc.collect()
    held = _held_becomes(pool[0], 0)
    got = ray.get([_driver.remote(pool, x) for _ in range(3)], timeout=120)
    for g in got:
        np.testing.assert_array_equal(g, 2 * x)
    assert _held_becomes(pool[0], held) == held
    assert pool[0].run("ext_add_kernel.add", pool[0].upload(x), pool[0].upload(x))  # still up


def test_work_is_placed_by_the_actors_caps(pool):
    assert [h.backend for h in pool.where(op="linalg.qr")] == ["cpu:0"]  # no WebGPU variant
    assert len(pool.where(op="ext_add_kernel.add")) == 2
    with pytest.raises(tf.UnsupportedError, match="no actor of the pool matches"):
        pool.where(op="ext_add_kernel.add", kind="cuda")
    with pytest.raises(tf.UnsupportedError, match="no actor of the pool matches"):
        pool.where(arch="sm_90")


def test_what_ray_cannot_place_in_time_is_a_call_timeout_and_leaves_nothing_behind(cluster):
    free = ray.available_resources().get("CPU")
    for wanted in ({"arch": "sm_90"}, {"accelerator_type": "H100"}):
        with pytest.raises(tf.CallTimeoutError, match="did not answer start within 1"):
            HostPool.start("cpu", actors=1, timeout_s=1, **wanted)
    with pytest.raises(tf.CallTimeoutError, match=r"did not reserve 3 bundle\(s\)") as info:
        HostPool.start("cpu", actors=3, num_cpus=1, strategy="SPREAD", timeout_s=1)
    assert isinstance(info.value, TimeoutError)
    assert all(g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU") != free and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU") == free
    with pytest.raises(tf.ValidationError, match="pass 'cuda', not 'cuda:1'"):
        HostPool.start("cuda:1")
    with pytest.raises(tf.ValidationError, match="not one of PACK"):
        HostPool.start("cpu", actors=1, num_cpus=1, strategy="TIGHT")
    with pytest.raises(tf.ValidationError, match="asks for none"):
        HostPool.start("cpu", actors=1, strategy="PACK")
    with pytest.raises(tf.ValidationError, match="not passed through"):
        HostPool.start("cpu", actors=1, actor_options={"num_gpus": 1})


def test_a_placement_group_and_actor_options_pass_through_to_ray(cluster):
    with HostPool.start(
        "cpu",
        actors=2,
        num_cpus=0.5,
        strategy="STRICT_PACK",
        actor_options={"name": "tf-test-host", "namespace": "tf-tests", "max_restarts": 1},
    ) as packed:
        (group,) = [g for g in ray.util.placement_group_table().values() if g["state"] == "CREATED"]
        assert group["strategy"] == "STRICT_PACK" and len(group["bundles"]) == 2
        named = ray.get_actor("tf-test-host-1", namespace="tf-tests")
        assert ray.get(named.ping.remote(), timeout=60) == packed[1].id
        x = np.ones(2, np.float32)
        np.testing.assert_array_equal(
            packed.gather(packed.map("ext_add_kernel.add", [(x, x)])), [[2, 2]]
        )
    assert all(g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())


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
        assert appears(Path(unique_id.decode()) / "rank0")
        with pytest.raises(TimeoutError) as timed_out:
            stuck.result(timeout_s=0.2)
        assert isinstance(timed_out.value, tf.CallTimeoutError)
        assert timed_out.value.actor == host.id and timed_out.value.timeout_s == 0.2
        old, dead = host.id, host.actor
        host.restart(timeout_s=60)  # the hung call ends with the old actor; the pool keeps one
        assert host.id != old and lone[0] is host
        with pytest.raises(tf.HostActorDiedError, match="died") as died:
            stuck.result(timeout_s=30)
        assert died.value.actor == old
        np.testing.assert_array_equal(host.download(host.upload(np.ones(2, np.float32))), [1, 1])
        # Killed mid-call: the call in flight, then the next one, are typed. (A call made right
        # after ray.kill may still run: the kill reaches the actor asynchronously.)
        unique_id = host.submit("collective_unique_id", STAND_IN).result()
        stuck = host.submit("collective_init", unique_id, 2, 0, STAND_IN)
        assert appears(Path(unique_id.decode()) / "rank0")
        ray.kill(host.actor)
        with pytest.raises(tf.HostActorDiedError, match="died"):
            stuck.result(timeout_s=30)
        with pytest.raises(tf.HostActorDiedError, match="died"):
            host.upload(np.ones(2, np.float32), timeout_s=30)
        assert dead is not host.actor


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_shutdown_leaves_no_process_behind(pool):
    ray_processes = ray_children()
    workers = {int(h.id.split("/")[1]) for h in pool}
    assert ray_processes and workers
    kept = pool[0].upload(np.ones(2, np.float32))
    ray.shutdown()
    with pytest.raises(tf.RuntimeStateError, match="Ray connection is shut down"):
        pool[0].download(kept, timeout_s=5)  # typed and at once, no new cluster started
    assert not ray.is_initialized()
    with pytest.raises(KeyError, match="the block's own"):
        with pool:  # leaving it after ray.shutdown(): nothing to end, the block's error intact
            raise KeyError("the block's own")
    deadline = time.monotonic() + 30
    while any(map(_alive, ray_processes | workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in ray_processes | workers if _alive(p)]

"""NCCL collectives on a CUDA runtime of the simulated driver (no GPU needed; runs in CI).

The stand-in binding moves bytes in the fake driver's memory and records what it was handed: the
pointers of the borrowed tensors and the runtime's own stream, with no synchronization.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

from support.fake_nccl import DriverNccl

import tenferro_host as tf
from tenferro_host.distributed.collectives import NcclCommunicator


@pytest.fixture
def setup(install):
    fake = install(1)
    rt = install.make(0, tf.Host())
    binding = DriverNccl(fake)
    return rt, binding, NcclCommunicator(rt, 1, 0, b"uid", binding=binding)


def test_all_reduce_hands_nccl_the_tensors_pointers_and_the_runtime_stream_without_syncing(setup):
    rt, binding, comm = setup
    x = rt.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
    syncs = rt.stats()["synchronizations"]
    out = comm.all_reduce(x)
    assert rt.stats()["synchronizations"] == syncs
    (name, _, send, recv, count, dtype, op, stream) = binding.calls[-1]
    assert (name, send, recv, count, dtype, op) == (
        "all_reduce",
        x.storage.ptr,
        out.storage.ptr,
        6,
        "Float32",
        "Sum",
    )
    assert stream == int(rt._stream) != 0
    assert out.shape == (2, 3) and out.backend is rt
    np.testing.assert_array_equal(out.download(), np.arange(6).reshape(2, 3))


def test_in_place_all_reduce_borrows_the_tensor_once(setup):
    rt, binding, comm = setup
    x = rt.upload(np.ones(4, np.int64))
    assert comm.all_reduce(x, x, op="max") is x
    assert binding.calls[-1][2] == binding.calls[-1][3] == x.storage.ptr
    assert binding.calls[-1][5:7] == ("Int64", "Max")


def test_all_gather_and_broadcast_shapes(setup):
    rt, binding, comm = setup
    x = rt.upload(np.arange(3, dtype=np.float64))
    gathered = comm.all_gather(x)
    assert gathered.shape == (1, 3)
    np.testing.assert_array_equal(gathered.download(), [[0, 1, 2]])
    out = comm.broadcast(x, root=0)
    assert binding.calls[-1][0] == "broadcast" and binding.calls[-1][6] == 0
    np.testing.assert_array_equal(out.download(), [0, 1, 2])


def test_wrong_inputs_are_typed_errors(setup):
    rt, _, comm = setup
    x = rt.upload(np.ones(4, np.float32))
    with pytest.raises(tf.DTypeError, match="float32"):
        comm.all_reduce(rt.upload(np.ones(2, np.complex64)))
    with pytest.raises(tf.ShapeError, match=r"float32\[4\]"):
        comm.all_reduce(x, rt.zeros("float32", (5,)))
    with pytest.raises(tf.ValidationError, match="reduces by"):
        comm.all_reduce(x, op="mean")
    with pytest.raises(tf.ValidationError, match="root 1"):
        comm.broadcast(x, root=1)
    with pytest.raises(tf.ForeignRuntimeError):
        comm.all_reduce(tf.Host().backend("cpu").upload(np.ones(4, np.float32)))
    comm.close()
    assert comm.binding.calls[-1][0] == "close"
    with pytest.raises(tf.SessionClosedError, match="closed communicator"):
        comm.all_reduce(x)


def test_a_rank_outside_the_communicator_is_refused(install):
    install(1)
    rt = install.make(0, tf.Host())
    with pytest.raises(tf.ValidationError, match=r"rank 2 is outside 0\.\.1"):
        NcclCommunicator(rt, 2, 2, b"uid", binding=DriverNccl(None))


def test_node_resources_count_the_gpus_by_arch(install):
    from tenferro_host.distributed import arch_resource, node_resources

    install(2)
    host = tf.Host()
    arch = host.backend_status("cuda").devices[0]["arch"]
    assert node_resources(host) == {arch_resource(arch): 2.0}
    assert arch_resource("sm_90") == "tenferro.arch.sm_90"

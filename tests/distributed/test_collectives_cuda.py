"""One-rank NCCL collectives on a real GPU, without Ray: the communicator bootstrapped directly
(its own unique id), every collective enqueued on the runtime's stream with no synchronization;
NCCL's nonblocking join of a rank whose peer never comes, given up after its timeout or on its
cancel event, and ``ncclCommAbort`` freeing it (every wait bounded)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from support.cuda_support import cuda_runtime

import tenferro_host as tf
from tenferro_host.distributed.collectives import NcclBinding, NcclCommunicator

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def comm():
    rt = cuda_runtime()
    binding = NcclBinding()  # an UnsupportedError here: nccl4py or libnccl is missing
    communicator = NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding)
    yield communicator
    communicator.close()


def test_one_rank_all_reduce_on_the_runtime_stream_without_synchronizing(comm):
    rt = comm.runtime
    x = rt.upload(np.arange(1 << 16, dtype=np.float32))
    y = rt.empty("float32", x.shape)
    syncs = rt.stats()["synchronizations"]
    out = comm.all_reduce(x, y)
    again = comm.all_reduce(out, out, op="max")  # in place, ordered behind the first
    assert rt.stats()["synchronizations"] == syncs
    assert out is y and again is y
    np.testing.assert_array_equal(rt.download(y), np.arange(1 << 16, dtype=np.float32))


def test_one_rank_all_gather_and_broadcast(comm):
    rt = comm.runtime
    x = rt.upload(np.arange(12, dtype=np.int32).reshape(3, 4))
    syncs = rt.stats()["synchronizations"]
    gathered = comm.all_gather(x)
    sent = comm.broadcast(x, root=0)
    assert rt.stats()["synchronizations"] == syncs
    np.testing.assert_array_equal(rt.download(gathered), np.arange(12).reshape(1, 3, 4))
    np.testing.assert_array_equal(rt.download(sent), np.arange(12).reshape(3, 4))


def test_a_join_whose_peer_never_comes_times_out_aborted_and_the_runtime_works_on():
    rt = cuda_runtime()
    binding = NcclBinding()
    with pytest.raises(tf.CallTimeoutError, match="rank 0 of 2: NCCL join did not complete"):
        NcclCommunicator(rt, 2, 0, binding.unique_id(), binding=binding, timeout_s=2)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    unique_id = binding.unique_id()
    with pytest.raises(tf.SessionClosedError, match="join was aborted"):
        NcclCommunicator(rt, 2, 0, unique_id, binding=binding, timeout_s=60, cancel=cancel)
    comm = NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding, timeout_s=60)
    x = rt.upload(np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(rt.download(comm.all_reduce(x)), np.arange(8))
    comm.close()


def test_an_aborted_communicator_refuses_collectives_and_a_new_one_works():
    rt = cuda_runtime()
    binding = NcclBinding()
    comm = NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding, timeout_s=60)
    x = rt.upload(np.ones(4, np.float32))
    comm.all_reduce(x, x)
    comm.abort()  # the all_reduce may still be on the stream: it ends, x is undefined
    with pytest.raises(tf.SessionClosedError, match="closed by an abort"):
        comm.all_reduce(x)
    again = NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding, timeout_s=60)
    y = rt.upload(np.full(4, 3, np.float32))
    np.testing.assert_array_equal(rt.download(again.broadcast(y)), np.full(4, 3))
    again.close()

"""One-rank NCCL collectives on a real GPU, without Ray: the communicator bootstrapped directly
(its own unique id), every collective enqueued on the runtime's stream with no synchronization."""

from __future__ import annotations

import numpy as np
import pytest
from support.cuda_support import cuda_runtime

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

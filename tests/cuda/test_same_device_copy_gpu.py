"""tf.cuda.copy_from_same_device: two runtimes on one GPU, ordered by events only."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from support.cuda_support import SPIN_SRC, cuda_runtime, raw_session

import tenferro_host as tf
from tenferro_host.cuda import raw

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def rt():
    return cuda_runtime()


def test_copy_between_runtimes_of_one_gpu(rt):
    other = rt.host.new_backend("cuda")
    assert other.capabilities()[tf.ExtensionCapability.SAME_DEVICE_ASYNC_COPY]
    x = np.arange(3 * 5, dtype=np.float64).reshape(3, 5)
    src = rt.upload(x)
    syncs = (rt.stats()["synchronizations"], other.stats()["synchronizations"])
    with rt.session() as s_src, other.session() as s_dst:
        with tf.cuda.exec_session(s_src).raw("tests.spin") as rs:  # keep the source stream busy
            flag = rs.alloc_output(tf.int32, (1,))
            rs.launch(
                rs.compile_nvrtc(SPIN_SRC).function("spin"),
                raw.LaunchConfig(1, 1),
                [rs.tensor_mut(flag), raw.u64(20_000_000)],
            )
        copied = tf.cuda.copy_from_same_device(s_src, s_dst, src)
        view = tf.cuda.copy_from_same_device(s_src, tf.cuda.exec_session(s_dst), src.T[1:])
    del src
    gc.collect()
    assert (rt.stats()["synchronizations"], other.stats()["synchronizations"]) == syncs
    assert copied.storage.domain == other.domain and copied.backend is other
    np.testing.assert_array_equal(copied.download(), x)
    np.testing.assert_array_equal(view.download(), x.T[1:])
    trace = [r for r in other.transfer_trace() if r.kind == "same_device"]
    assert len(trace) == 2 and trace[0].nbytes == x.nbytes and trace[0].src == rt.name
    with raw_session(other) as (_, rs):
        rs.tensor(copied)  # accepted by the destination's sessions


def test_copy_errors(rt):
    other = rt.host.new_backend("cuda")
    t = rt.upload(np.ones(4, np.float32))
    cpu = rt.host.backend("cpu")
    with rt.session() as a, other.session() as b, cpu.session() as c:
        with pytest.raises(tf.ValidationError, match="same runtime"):
            tf.cuda.copy_from_same_device(a, a, t)
        with pytest.raises(tf.ForeignRuntimeError):
            tf.cuda.copy_from_same_device(b, a, t)  # t is not the source's
        with pytest.raises(tf.ValidationError, match="CUDA session"):
            tf.cuda.copy_from_same_device(a, c, t)
    with pytest.raises(tf.SessionClosedError):
        tf.cuda.copy_from_same_device(a, b, t)
    with rt.session() as a, other.session() as b:
        copied = tf.cuda.copy_from_same_device(a, b, rt.zeros(tf.float32, (0, 2)))
        assert copied.shape == (0, 2) and copied.backend is other

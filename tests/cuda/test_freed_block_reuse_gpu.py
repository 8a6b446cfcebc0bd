"""Freed pool blocks reused on a real device: freed outputs come back without the pool, results stay
right when a reused block is written again, trim() and close() leave nothing cached, and host.run
through op handles enforces the declared contract on CUDA too."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from support.cuda_support import ADD_SRC, raw_session, shared_host

import tenferro_host as tf
from tenferro_host.cuda import raw

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def rt():
    host = shared_host()
    status = host.backend_status("cuda")
    if not status.available:
        pytest.skip(f"no CUDA device: {status.reason}")
    runtime = host.new_backend("cuda")  # its own pool and cache: counts start at zero
    yield runtime
    runtime.close()


def test_outputs_reuse_freed_blocks_and_stay_correct(rt):
    a = rt.upload(np.arange(1024, dtype=np.float32))
    with raw_session(rt) as (_, rs):
        fn = rs.compile_nvrtc(ADD_SRC).function("add_kernel")
        cfg = raw.LaunchConfig.flat(1024, 256)
        ref = rs.tensor(a)
        for i in range(200):
            out = rs.alloc_output(tf.float32, (1024,))
            rs.launch(fn, cfg, [rs.tensor_mut(out), ref, ref, raw.i32(1024)])
            if i % 50 == 0:
                np.testing.assert_array_equal(out.download(), 2 * np.arange(1024))
    del out
    gc.collect()
    rt.drain_deferred()  # the last outputs' blocks go back to the cache
    stats = rt.pool_stats()
    assert stats["cache_hits"] >= 190 and stats["cache_misses"] <= 10
    assert stats["used_current"] >= stats["cached_bytes"] > 0


def test_trim_and_close_free_the_cached_blocks(rt):
    for _ in range(10):
        rt.empty(tf.float32, (4096,))
    gc.collect()
    rt.synchronize()
    rt.drain_deferred()
    assert rt.pool_stats()["cached_bytes"] > 0
    rt.trim()
    rt.synchronize()
    stats = rt.pool_stats()
    assert stats["cached_bytes"] == 0 and stats["used_current"] == 0
    rt.empty(tf.float32, (4096,))
    rt.close()
    assert rt.deferred_errors == 0


def test_host_run_checks_outputs_on_cuda(rt):
    host = rt.host
    view = host.registry.staging("test-block-cache-gpu")
    view.add_op(
        tf.OpSpec(
            name="gpu_contract.widen",
            signature=tf.Signature(inputs=("x",)),
            reference=np.copy,
            variants={"cuda-raw": lambda ex, x: ex.runtime.upload(x.download().astype(np.float64))},
        )
    )
    view.commit()
    x = rt.upload(np.ones(4, np.float32))
    with pytest.raises(tf.DTypeError, match=r"variant 'cuda-raw'.* is float64"):
        host.run("gpu_contract.widen", x)

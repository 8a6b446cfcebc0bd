"""Op plans on a real device: the replayed add (cuLaunchKernel over a pre-packed block, the
kernel's CUkernel handle passed as the CUfunction) computes what the full path computes, for
dtypes, sizes and offset views; a DSL op on CUDA is replayed too. (The guards and the fault
rules of a replayed launch are tested over the driver stand-in: tests/cuda/test_op_plan.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from support.cuda_support import cuda_runtime, shared_host

from tenferro_host.benchmarks.kernels import DSL_OP, register_dsl_op
from tenferro_host.provider import _op_plan

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]
ADD = "ext_add_kernel.add"


@pytest.fixture(autouse=True)
def plans_on(monkeypatch):
    monkeypatch.setattr(_op_plan, "ENABLED", True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("n", [1, 1000, 70_000])
def test_a_replayed_add_computes_what_the_full_path_computes(dtype, n):
    rt = cuda_runtime()
    host = shared_host()
    x = np.arange(n).astype(dtype)
    y = (np.arange(n) * 3 % 7).astype(dtype)
    a, b = rt.upload(x), rt.upload(y)
    outs = [host.run(ADD, a, b) for _ in range(6)]  # full, full (recorded twice), replays
    assert any(v == "replay" for v in host.op(ADD).plans().values())
    for out in outs:
        np.testing.assert_array_equal(out.download(), x + y)


def test_a_replayed_add_of_offset_views_reads_the_right_elements():
    rt = cuda_runtime()
    host = shared_host()
    big = np.arange(2 * 512, dtype=np.float32).reshape(2, 512, order="F")
    t = rt.upload(big)
    for _ in range(5):
        lhs, rhs = t[:, 10:266], t[:, 100:356]  # compact views at other offsets
        out = host.run(ADD, lhs, rhs)
        np.testing.assert_array_equal(out.download(), big[:, 10:266] + big[:, 100:356])


def test_a_dsl_op_on_cuda_is_replayed_and_right():
    rt = cuda_runtime()
    host = shared_host()
    register_dsl_op(host)
    x = np.linspace(0, 1, 4096, dtype=np.float32)
    a = rt.upload(x)
    outs = [host.run(DSL_OP, a, a) for _ in range(6)]
    assert any(v == "replay" for v in host.op(DSL_OP).plans().values())
    for out in outs:
        np.testing.assert_allclose(out.download(), x + x)


def test_a_chain_of_replays_reusing_each_dead_output_block_stays_right():
    """acc = acc + b, 64 times: each call's output takes the block of the output that died two
    calls before, straight from the deferred queue, while the previous call's kernel may still
    read it — one stream orders the reuse; the result is exact."""
    rt = cuda_runtime()
    host = shared_host()
    x = np.arange(4096, dtype=np.float32)
    y = np.full(4096, 3, dtype=np.float32)
    acc, b = rt.upload(x), rt.upload(y)
    ptrs = set()
    for _ in range(64):
        acc = host.run(ADD, acc, b)
        ptrs.add(acc.storage.ptr)
    assert any(v == "replay" for v in host.op(ADD).plans().values())
    assert len(ptrs) <= 4  # the dead outputs' blocks came back
    np.testing.assert_array_equal(acc.download(), x + 64 * y)

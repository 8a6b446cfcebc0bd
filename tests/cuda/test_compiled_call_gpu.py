"""The compiled planned call on a GPU: the same values as the pure-Python call for the raw and
the DSL add, and no memory read after it is freed when every Python reference a call started
with goes away mid-call (``scripts/gpu-verify`` runs this file again under
``compute-sanitizer --tool memcheck``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.cuda_support import cuda_runtime

from tenferro_host import _op_handle
from tenferro_host.benchmarks.kernels import DSL_OP, register_dsl_op
from tenferro_host.provider import _compiled, _op_plan

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.cuda,
    pytest.mark.skipif(_compiled.CALL is None, reason=f"pure Python: {_compiled.STATE}"),
]
ADD = "ext_add_kernel.add"


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    runtime = cuda_runtime()
    register_dsl_op(runtime.host)
    return runtime


@pytest.mark.parametrize("op", [ADD, DSL_OP])
@pytest.mark.parametrize("n", [1, 1000, 1 << 16])
def test_the_compiled_and_the_python_call_give_the_same_values(rt, monkeypatch, op, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    a, b = rt.upload(x), rt.upload(2 * x)
    results = []
    for call in (_compiled.CALL, None):
        monkeypatch.setattr(_op_handle, "CALL", call)
        rt.host._handles.clear()
        outs = [rt.host.run(op, a, b) for _ in range(5)]  # recorded twice, then replayed
        results.append([o.download() for o in outs])
    assert list(rt.host.op(op).plans().values()) == ["replay"]  # (its core: the extension's)
    for compiled, python in zip(*results, strict=True):
        np.testing.assert_array_equal(compiled, python)
        np.testing.assert_array_equal(compiled, 3 * x)


def test_inputs_and_a_plan_dropped_mid_call_leave_nothing_read_after_free(rt, monkeypatch):
    host, x = rt.host, np.arange(4096, dtype=np.float32)
    handle, dropping = host.op(ADD), [False]
    allocate_block = type(rt).allocate_block

    def allocation(self: Any, *args: Any, **kwargs: Any) -> Any:
        if dropping[0]:  # the plan loses its last holder while its core allocates
            handle.forget_plans()
        return allocate_block(self, *args, **kwargs)

    monkeypatch.setattr(type(rt), "allocate_block", allocation)  # (a replay binds it when made)
    kept = [handle(rt.upload(x), rt.upload(x)) for _ in range(3)]  # temporaries: freed at once
    assert list(handle.plans().values()) == ["replay"]  # (its core: the extension's)
    dropping[0] = True
    kept.append(handle(rt.upload(x), rt.upload(x)))  # the inputs die with the call
    for _ in range(20):  # the freed inputs' blocks serve later calls' outputs
        kept.append(host.run(ADD, rt.upload(x), rt.upload(x)))
    for out in kept:
        np.testing.assert_array_equal(out.download(), 2 * x)

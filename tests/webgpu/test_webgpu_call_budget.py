"""The WebGPU op call's Python cost, counted (llvmpipe here): a gate that fails when host.run of
the example add (its DSL variant) grows. WebGPU has no op replay yet, so a call is the full
path both ways: about 470 calls (wgpu-py's own proxies are most of them), 32 files and 161
switches since the memos on its path became ``Memo`` objects (``_memo.py``, entered 6 times; 154
before); the budget of docs/op-call-cost.md (40 calls, 12 files, 25 switches) is not met."""

from __future__ import annotations

import numpy as np
from support.call_budget import call_trace, calls_per_op

ADD = "ext_add_kernel.add"


def test_host_run_on_webgpu_stays_within_its_call_budget(webgpu_host, rt):
    host = webgpu_host
    a, b = rt.upload(np.ones(1024, np.float32)), rt.upload(np.ones(1024, np.float32))
    for _ in range(10):
        host.run(ADD, a, b)
    calls = calls_per_op(lambda: host.run(ADD, a, b), n=20)
    print(f"{calls} calls per webgpu op call; plans: {host.op(ADD).plans()}")
    assert calls <= 500
    distinct, switches, entered = call_trace(lambda: host.run(ADD, a, b), __file__)
    print(f"{len(distinct)} files, {switches} switches, entries {dict(entered)}")
    assert len(distinct) <= 32 and switches <= 165

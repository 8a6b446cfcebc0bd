"""The CPU op call's Python cost, counted: a gate that fails when host.run of the example add
grows. The CPU backend has no op replay (its variants are numpy code, nothing a seam can
record), so a call is the full path both ways: about 60 calls (the target is 20), 10 files,
16 switches between consecutive calls' files."""

from __future__ import annotations

import numpy as np
from support.call_budget import call_trace, calls_per_op

import tenferro_host as tf

ADD = "ext_add_kernel.add"


def test_host_run_on_cpu_stays_within_its_call_budget():
    host = tf.Host()
    cpu = host.backend("cpu")
    a, b = cpu.upload(np.ones(1024, np.float32)), cpu.upload(np.ones(1024, np.float32))
    for _ in range(10):
        host.run(ADD, a, b)
    calls = calls_per_op(lambda: host.run(ADD, a, b))
    print(f"{calls} calls per cpu op call; plans: {host.op(ADD).plans()}")
    assert calls <= 62
    distinct, switches, entered = call_trace(lambda: host.run(ADD, a, b), __file__)
    print(f"{len(distinct)} files, {switches} switches, entries {dict(entered)}")
    assert len(distinct) <= 12 and switches <= 25 and max(entered.values()) <= 8

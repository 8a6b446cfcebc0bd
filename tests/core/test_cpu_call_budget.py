"""The CPU op call's Python cost, counted (never timed): a gate that fails when host.run of the
example add grows. Planned (the example's cpu variant launches through ``ex.launch``), a call
is ``host.run``, the handle, its plan table's key and guard, the replay, the output's
allocation and ``np.add``: 13 calls under cProfile (the target is 20; this gate's count, its own
lambda included, reads 14.01: 12.01 before the three backends' replays shared a base whose
allocation is a call of its own and the key moved into the plan table that a captured graph
shares, 14 before the handle's key lost its per-input sharing index and ``host.run`` its
registry walk) in 9 files, each entered once; on the full path (``TENFERRO_OP_PLAN=0``) 66 in 14
files (70 before the session's open-thread check became one set of the runtime's and the
handle's plan bookkeeping moved into the plan table; 13 files before the exec session had a
module of its own, ``provider/_exec_session.py``, so that the session base imports no capture)."""

from __future__ import annotations

import numpy as np
from support.call_budget import call_trace, calls_per_op

import tenferro_host as tf
from tenferro_host.provider import _op_plan

ADD = "ext_add_kernel.add"
#: Call budgets of one op call (cProfile's count: Python and C calls), planned and on the full
#: path; (files, switches between consecutive calls' files, most entries of one file) likewise.
#: Planned, 15.01 on the pure-Python call since the plan table's ``find`` hands its key to
#: ``lookup`` (what a framework bridge's prepared call keys its buffers through). The full path,
#: 67.01 since ``host.run`` is a compiled method (it hands the full path to the Python one).
CPU_PLANNED, CPU_FULL_PATH = 16, 68
TRACE_PLANNED, TRACE_FULL_PATH = (9, 8, 1), (14, 22, 4)


def test_host_run_on_cpu_stays_within_its_call_budget():
    host = tf.Host()
    cpu = host.backend("cpu")
    a, b = cpu.upload(np.ones(1024, np.float32)), cpu.upload(np.ones(1024, np.float32))
    for _ in range(10):
        host.run(ADD, a, b)
    plans = host.op(ADD).plans()
    assert ("replay" in plans.values()) is _op_plan.ENABLED
    calls = calls_per_op(lambda: host.run(ADD, a, b))
    print(f"{calls} calls per cpu op call; plans: {plans}")
    assert calls <= (CPU_PLANNED if _op_plan.ENABLED else CPU_FULL_PATH)
    distinct, switches, entered = call_trace(lambda: host.run(ADD, a, b), __file__)
    print(f"{len(distinct)} files, {switches} switches, entries {dict(entered)}")
    files, most_switches, most_entries = TRACE_PLANNED if _op_plan.ENABLED else TRACE_FULL_PATH
    assert len(distinct) <= files and switches <= most_switches
    assert max(entered.values()) <= most_entries

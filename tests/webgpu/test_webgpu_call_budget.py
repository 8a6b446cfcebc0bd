"""The WebGPU op call's Python cost, counted (llvmpipe here): a gate that fails when host.run of
the example add (its DSL variant) grows, planned and on the full path.

Planned (docs/measurements/op-call-cost.md), a call is the handle's guard, the replay's guard,
the output from the free list (with the previous output's release), the cached bind group and
one encode + submit: 234 cProfile calls (232 before the three backends' replays shared a base whose
allocation is one call of its own and the key moved into the plan table, 234 before the
handle's last-key compare), of which 187 are wgpu-py's own for the dispatch (its proxies and
cffi structs: the bare wgpu-py dispatch of the same pipeline counts 187 alone), so ours are 47.
The trace counts wgpu-py's internals (with the stdlib they call) as one unit, being no project
file: 14 project files (the replay base and the plan table among them) and 20 switches, no file
entered more than 3 times (165 switches over 32
files before the replay, wgpu-py's files counted one by one). The full path
(``TENFERRO_OP_PLAN=0``) opens the sessions, checks and specializes: about 482 calls, 26 files
(generated dataclass code included) and 106 switches, the JIT base entered 15 times.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from support.call_budget import call_trace, calls_per_op

from tenferro_host.provider import _op_plan

ADD = "ext_add_kernel.add"
WGPU_PY = "wgpu-py (with the stdlib it calls)"

#: cProfile calls per call: {planned: budget}; planned, 187 (the dispatch in wgpu-py) + 29 (ours:
#: 47 before the queued buffer was reused without the free list) + a margin of 1 (a wgpu-py
#: patch release may add a proxy); the full path's is today's with 8.
CALLS = {True: 217, False: 490}
#: (project files, switches, most entries of one file) of the traced call, wgpu-py one unit:
#: what each path reaches today (planned: each file entered once; 14, 20 and 3 before).
TRACE = {True: (12, 12, 1), False: (26, 106, 15)}


def _package_dir(name: str) -> str:
    """Where package ``name`` lies, found without importing it: a source tree or site-packages,
    whichever way the project is installed."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, name
    return os.path.join(next(iter(spec.submodule_search_locations)), "")


PROJECT = tuple(
    _package_dir(name)
    for name in (
        "tenferro_host",
        "tenferro_host_webgpu",
        "tenferro_host_cuda_jit",
        "ext_add_kernel",
    )
)


def _library(filename: str) -> str | None:
    """wgpu-py's files and the stdlib's: one unit; the project's (and generated code) as is."""
    ours = filename.startswith(PROJECT)
    return None if ours or filename.startswith("<") else WGPU_PY


@pytest.mark.parametrize("planned", [True, False], ids=["planned", "full-path"])
def test_host_run_on_webgpu_stays_within_its_call_budget(webgpu_host, rt, monkeypatch, planned):
    monkeypatch.setattr(_op_plan, "ENABLED", planned)
    host = webgpu_host
    a, b = rt.upload(np.ones(1024, np.float32)), rt.upload(np.ones(1024, np.float32))
    for _ in range(10):
        host.run(ADD, a, b)
    if planned:
        assert "replay" in host.op(ADD).plans().values()
    calls = calls_per_op(lambda: host.run(ADD, a, b), n=20)
    print(f"{calls} calls per webgpu op call; plans: {host.op(ADD).plans()}")
    assert calls <= CALLS[planned]
    _, switches, entered = call_trace(lambda: host.run(ADD, a, b), __file__, _library)
    project = {f: n for f, n in entered.items() if f != WGPU_PY}
    print(f"{len(project)} project files, {switches} switches, entries {dict(entered)}")
    files, most_switches, most_entries = TRACE[planned]
    assert len(project) <= files and switches <= most_switches
    assert max(project.values()) <= most_entries

"""Where one op call's time goes: a full cProfile of the calls users make, and the cost of each
CUDA driver call the host makes on its path, measured bare.

The benchmark report keeps the top functions by own time; this prints the whole table (own
time, calls per op, and the callers' file) for ``host.run`` of the cuda-raw add, a DSL op
through ``host.run`` and the CPU add, plus the per-call cost of the driver entry points a
session may touch (context query/switch, event record/query, stream query) — the budget any
redesign works within.

    python bench/profile_call.py [--calls 2000] [--top 45]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tenferro_host as tf
from tenferro_host.benchmarks.kernels import DSL_OP, register_dsl_op

N = 1024


def bare_us(fn: Callable[[], Any], calls: int) -> float:
    """Median µs per call of ``fn`` over 7 batches (no profiler)."""
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return sorted(samples)[3]


def table(name: str, fn: Callable[[], Any], calls: int, top: int, sync: Callable[[], Any]) -> None:
    """Warm ``fn`` up, time it bare, then print its cProfile table."""
    for _ in range(200):
        fn()
    sync()
    us = bare_us(fn, calls)
    sync()
    profile_table(f"{name}: {us:.2f} µs per call bare", fn, calls, top, sync)


def profile_table(
    title: str, fn: Callable[[], Any], calls: int, top: int, sync: Callable[[], Any]
) -> None:
    """Profile ``calls`` calls of ``fn``; print the ``top`` functions by own time (own and
    cumulative µs per call, calls per call) and the files with Python code on the path."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    sync()
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = (
            f"{Path(filename).parent.name}/{Path(filename).name}:{line}({func})" if line else func
        )
        rows.append((tottime / calls * 1e6, cumtime / calls * 1e6, ncalls / calls, where))
    rows.sort(reverse=True)
    total = stats.total_calls / calls  # type: ignore[attr-defined]
    print(f"\n## {title}, {total:.0f} Python-level calls per call")
    print(f"{'own µs':>8} {'cum µs':>8} {'calls':>6}  function")
    for own, cum, n, where in rows[:top]:
        print(f"{own:8.2f} {cum:8.2f} {n:6.2f}  {where}")
    files = {Path(f).name for (f, line, _), _v in stats.stats.items() if line}  # type: ignore[attr-defined]
    print(f"files with Python code on the path: {len(files)}: {sorted(files)}")


def driver_costs(calls: int) -> None:
    from cuda.bindings import driver as d

    host = tf.Host()
    rt = host.backend("cuda")
    with rt.session():
        pass
    ctx = d.cuCtxGetCurrent()[1]
    stream = rt.stream_handle
    ev = d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)[1]
    d.cuEventRecord(ev, stream)
    rt.synchronize()
    cases = {
        "cuCtxGetCurrent": lambda: d.cuCtxGetCurrent(),
        "cuCtxSetCurrent(same)": lambda: d.cuCtxSetCurrent(ctx),
        "cuCtxPushCurrent+Pop": lambda: (d.cuCtxPushCurrent(ctx), d.cuCtxPopCurrent()),
        "cuEventRecord": lambda: d.cuEventRecord(ev, stream),
        "cuEventQuery(done)": lambda: d.cuEventQuery(ev),
        "cuStreamQuery(idle)": lambda: d.cuStreamQuery(stream),
        "int(CUresult)": lambda: int(d.CUresult.CUDA_SUCCESS),
    }
    print("\n## driver calls through cuda.bindings, bare")
    for name, fn in cases.items():
        print(f"{bare_us(fn, calls):8.3f} µs  {name}")
    rt.synchronize()
    d.cuEventDestroy(ev)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=45)
    opts = parser.parse_args()
    host = tf.Host()
    register_dsl_op(host)
    ones = np.ones(N, np.float32)
    cpu = host.backend("cpu")
    ca, cb = cpu.upload(ones), cpu.upload(ones)
    table(
        "host.run cpu add",
        lambda: host.run("ext_add_kernel.add", ca, cb),
        opts.calls,
        opts.top,
        lambda: None,
    )
    if not host.backend_status("cuda").available:
        print("no CUDA here:", host.backend_status("cuda").reason)
        return 0
    rt = host.backend("cuda")
    a, b = rt.upload(ones), rt.upload(ones)
    for name, op in (("host.run cuda-raw add", "ext_add_kernel.add"), ("host.run DSL op", DSL_OP)):
        table(name, lambda op=op: host.run(op, a, b), opts.calls, opts.top, rt.synchronize)
    with rt.session() as s:
        ex = s.exec_session()

        def empty() -> None:
            with ex.raw("p.empty"):
                pass

        table("with ex.raw(op): pass", empty, opts.calls, 20, rt.synchronize)
        with ex.raw("p.body") as rs:
            for name, fn in (
                ("rs.alloc_output", lambda: rs.alloc_output(tf.float32, (N,))),
                ("rs.tensor", lambda: rs.tensor(a)),
            ):
                table(name, fn, opts.calls, 20, rt.synchronize)
    driver_costs(opts.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())

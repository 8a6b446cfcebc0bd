"""Where one WebGPU op call's time goes: ``host.run`` of the 1k f32 add against the same dispatch
through wgpu-py directly, interleaved in one process, and the whole cProfile table of host.run.

    python bench/profile_webgpu.py [--calls 2000] [--top 40] [--rounds 7]

The ratio is what to quote (medians of interleaved batches); absolute times depend on the
adapter (llvmpipe here, the NVIDIA Vulkan adapter on the H200).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

import tenferro_host as tf
from tenferro_host.benchmarks.kernel_rows import wall_seconds

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import interleaved
from profile_call import profile_table

from tenferro_host.benchmarks.baselines import wgpu_add
from tenferro_host.benchmarks.kernels import dsl_add

N = 1024
EXT_ADD = "ext_add_kernel.add"


def print_medians(cases: dict[str, Callable[[], Any]], calls: int, rounds: int, sync: Any) -> None:
    """Each case's interleaved median µs per call (the device waited for), against the first."""
    seconds = interleaved(cases, rounds, wall_seconds, calls, dict.fromkeys(cases, sync))
    base = next(iter(seconds.values()))
    print(f"\n## interleaved medians, {rounds} rounds x {calls} calls")
    for name, s in seconds.items():
        print(f"{s * 1e6:9.2f} µs  {s / base:5.2f}x  {name}")


def table(name: str, fn: Callable[[], Any], calls: int, top: int, sync: Any) -> None:
    """Warm ``fn`` up, then print its cProfile table (timed by the interleaved rounds)."""
    for _ in range(200):
        fn()
    sync()
    profile_table(f"{name} (profiled)", fn, calls, top, sync)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--no-profile", action="store_true")
    opts = parser.parse_args()
    host = tf.Host()
    if not host.backend_status("webgpu").available:
        print("no WebGPU here:", host.backend_status("webgpu").reason)
        return 0
    rt = host.backend("webgpu")
    print("adapter:", rt.device_info.name)
    ones = np.ones(N, np.float32)
    a, b = rt.upload(ones), rt.upload(ones)
    assert (rt.download(host.run(EXT_ADD, a, b)) == 2).all()
    direct, direct_sync = wgpu_add(rt.index)
    handle = host.op(EXT_ADD)

    def sync() -> None:
        rt.synchronize()
        direct_sync()

    cases = {
        "wgpu-py direct dispatch": direct,
        "host.run(ext_add_kernel.add)": lambda: host.run(EXT_ADD, a, b),
        "op handle": lambda: handle(a, b),
    }
    for fn in cases.values():
        for _ in range(200):
            fn()
    print_medians(cases, opts.calls, opts.rounds, sync)
    with ExitStack() as stack:  # the same tensors bound again: the cached bind group's path
        s = stack.enter_context(rt.session())
        js = stack.enter_context(s.exec_session().jit("bench.profile_webgpu"))
        out = rt.empty("float32", (N,))
        cube, dim = js.cube_count_1d(N), js.cube_dim_1d()
        session_cases = {
            "wgpu-py direct dispatch": direct,
            "js.launch in an open jit session, same tensors (batched)": lambda: js.launch(
                dsl_add, cube, dim, out, a, b
            ),
        }
        print_medians(session_cases, opts.calls, opts.rounds, sync)
        if not opts.no_profile:
            table(
                "js.launch, same tensors",
                session_cases[list(session_cases)[1]],
                opts.calls,
                20,
                sync,
            )
    if not opts.no_profile:
        table("wgpu-py direct", direct, opts.calls, 12, sync)
        table(
            "host.run webgpu add", cases["host.run(ext_add_kernel.add)"], opts.calls, opts.top, sync
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Host cost of one kernel launch: tenferro's raw seam against cuda.core and CuPy.

Interleaved in one process: each round times a batch of launches of every variant in turn
(empty kernel and 1k-element add kernel), then synchronizes outside the timed region so the
launch queue never fills. Reports the median per-launch microseconds over rounds and the ratios
the raw seam promises: ``PreparedLaunch.launch()`` <= 1.1x and ``rs.launch(fn, cfg, args)``
<= 1.5x cuda.core's bare ``launch``.

    python bench/launch_cost.py [--rounds 60] [--batch 200] [--json PATH]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tenferro_host as tf
from tenferro_host.cuda import raw

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import arguments, interleaved_medians, print_rows, write_json

SOURCE = r"""
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void add_kernel(float* out, const float* lhs, const float* rhs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lhs[i] + rhs[i];
}
"""
N = 1024
BLOCK = 256


def main() -> int:
    opts = arguments(__doc__)

    import cupy
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

    host = tf.Host()
    rt = host.backend("cuda")
    arch = rt.device_info.arch
    a = rt.upload(np.ones(N, np.float32))
    b = rt.upload(np.ones(N, np.float32))

    # cuda.core: its own stream and module of the same source.
    dev = Device(rt.index)
    dev.set_current()
    core_stream = dev.create_stream()
    obj = Program(SOURCE, "c++", ProgramOptions(arch=arch)).compile("cubin")
    core_empty, core_add = obj.get_kernel("empty_kernel"), obj.get_kernel("add_kernel")
    core_cfg1 = LaunchConfig(grid=1, block=1)
    core_cfgn = LaunchConfig(grid=N // BLOCK, block=BLOCK)

    # CuPy: RawKernel of the same source on its own arrays.
    cp_mod = cupy.RawModule(code=SOURCE, backend="nvrtc")
    cp_empty, cp_add = cp_mod.get_function("empty_kernel"), cp_mod.get_function("add_kernel")
    ca, cb = cupy.ones(N, cupy.float32), cupy.ones(N, cupy.float32)
    cout = cupy.empty(N, cupy.float32)
    n32 = np.int32(N)

    with rt.session() as s, tf.cuda.exec_session(s).raw("bench.launch_cost") as rs:
        module = rs.compile_nvrtc(SOURCE)
        f_empty, f_add = module.function("empty_kernel"), module.function("add_kernel")
        out = rs.alloc_output(tf.float32, (N,))
        add_args = [rs.tensor_mut(out), rs.tensor(a), rs.tensor(b), raw.i32(N)]
        cfg1, cfgn = raw.LaunchConfig(1, 1), raw.LaunchConfig.flat(N, BLOCK)
        p_empty = rs.prepare(f_empty, cfg1, [])
        p_add = rs.prepare(f_add, cfgn, add_args)
        ptrs = [r.data_ptr_unsafe() for r in add_args[:3]]
        stream = rt.stream_handle  # the runtime's CUstream, for the bare-binding reference row
        empty_handle = driver.CUfunction(int(f_empty.handle))

        def sync_all() -> None:
            rs.synchronize()
            core_stream.sync()
            cupy.cuda.Device().synchronize()

        variants: dict[str, Callable[[], None]] = {
            "empty/cuda.core launch": lambda: launch(core_stream, core_cfg1, core_empty),
            "empty/cupy RawKernel": lambda: cp_empty((1,), (1,), ()),
            "empty/tenferro prepared.launch()": p_empty.launch,
            "empty/tenferro rs.launch": lambda: rs.launch(f_empty, cfg1, ()),
            "empty/cuda.bindings cuLaunchKernel": lambda: driver.cuLaunchKernel(
                empty_handle, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0
            ),
            "add/cuda.core launch": lambda: launch(core_stream, core_cfgn, core_add, *ptrs, n32),
            "add/cupy RawKernel": lambda: cp_add((N // BLOCK,), (BLOCK,), (cout, ca, cb, n32)),
            "add/tenferro prepared.launch()": p_add.launch,
            "add/tenferro rs.launch": lambda: rs.launch(f_add, cfgn, add_args),
        }
        medians = interleaved_medians(variants, opts.rounds, opts.batch, sync_all)
        rs.synchronize()
        syncs_in_bench = rt.stats()["synchronizations"]
    ratios = {}
    for kernel in ("empty", "add"):
        base = medians[f"{kernel}/cuda.core launch"]
        ratios[f"{kernel}: prepared.launch() / cuda.core"] = (
            medians[f"{kernel}/tenferro prepared.launch()"] / base
        )
        ratios[f"{kernel}: rs.launch / cuda.core"] = medians[f"{kernel}/tenferro rs.launch"] / base
        ratios[f"{kernel}: cupy / cuda.core"] = medians[f"{kernel}/cupy RawKernel"] / base
    print(
        f"launch cost, median of {opts.rounds} rounds x {opts.batch} launches "
        f"({rt.device_info.name}, python {sys.version.split()[0]})"
    )
    print_rows(medians, 36, "{:7.2f} us")
    print_rows(ratios, 36, "{:7.2f}x")
    print(f"  synchronizations counted by the runtime: {syncs_in_bench}")
    write_json(opts.json, medians, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Host cost of a cached DSL launch on CUDA against a raw PreparedLaunch of the same kernel.

The add kernel is written once in the DSL; its generated CUDA C is also compiled and prepared in
a raw session, so both sides launch identical device code on the runtime's stream. Rows:

* raw ``PreparedLaunch.launch()`` and ``launch(args=...)`` (the seam's hot path);
* ``js.launch(add, ...)`` repeating the same arguments (replayed as is) and alternating two
  outputs (arguments converted and swapped on every launch);
* cupyx.jit (``@jit.rawkernel``) and a CuPy ``RawKernel`` of the same add, as baselines.

Interleaved in one process: each round times a batch of launches of every variant in turn and
synchronizes outside the timed region. Reports median microseconds per launch and the ratios;
the target is DSL <= 1.2x the raw PreparedLaunch.

    python bench/dsl_launch_cost.py [--rounds 60] [--batch 200] [--json PATH]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tenferro_host_cuda_jit._codegen import generate, kernel_abi

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.cuda import raw

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import arguments, interleaved_medians, write_json

N = 1024
BLOCK = 256
COUNT = (N // BLOCK, 1, 1)
DIM = (BLOCK, 1, 1)


@K.kernel
def add(out: K.Array[K.F], lhs: K.Array[K.F], rhs: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = lhs[i] + rhs[i]


CUPY_ADD = r"""
extern "C" __global__ void add_kernel(float* out, const float* lhs, const float* rhs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lhs[i] + rhs[i];
}
"""


def raw_args(rs: Any, spec: Any, out: Any, lhs: Any, rhs: Any) -> list[Any]:
    """The generated kernel's arguments, from its ABI, for compact 1-D operands."""
    refs = {"out": rs.tensor_mut(out), "lhs": rs.tensor(lhs), "rhs": rs.tensor(rhs)}
    values = {"offset": raw.u64(0), "len": raw.u32(N), "shape": raw.u32(N), "stride": raw.u32(1)}
    args: list[Any] = []
    for p in kernel_abi(spec):
        if p.role == "data":
            args.append(refs[p.param])
        elif p.role == "count":
            args.append(raw.u32(COUNT[p.axis]))
        else:
            args.append(values[p.role])
    return args


def cupy_variants(n32: np.int32) -> dict[str, Callable[[], None]]:
    """cupyx.jit and RawKernel launches of the same add, or nothing without CuPy."""
    try:
        import cupy
        from cupyx import jit
    except ImportError as exc:
        print(f"  (CuPy baselines skipped: {exc})")
        return {}

    @jit.rawkernel()
    def cupyx_add(out: Any, lhs: Any, rhs: Any, n: Any) -> None:
        i = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        if i < n:
            out[i] = lhs[i] + rhs[i]

    ca, cb = cupy.ones(N, cupy.float32), cupy.ones(N, cupy.float32)
    cout = cupy.empty(N, cupy.float32)
    raw_kernel = cupy.RawKernel(CUPY_ADD, "add_kernel")
    grid, block = (COUNT[0],), (BLOCK,)
    cupyx_add(grid, block, (cout, ca, cb, n32))  # compile outside the timing
    return {
        "cupyx.jit rawkernel": lambda: cupyx_add(grid, block, (cout, ca, cb, n32)),
        "cupy RawKernel": lambda: raw_kernel(grid, block, (cout, ca, cb, n32)),
    }


def cupy_sync() -> None:
    try:
        import cupy
    except ImportError:
        return
    cupy.cuda.Device().synchronize()


def main() -> int:
    opts = arguments(__doc__)

    rt = tf.Host().backend("cuda")
    lhs = rt.upload(np.ones(N, np.float32))
    rhs = rt.upload(np.ones(N, np.float32))
    spec = add.specialize([K.ArrayDesc(dtypes.float32, 1)] * 3, {}, "cuda", (rt.device_info.arch,))
    source = generate(spec)
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        with ex.jit("bench.dsl_launch_cost") as js, ex.raw("bench.dsl_launch_cost") as rs:
            out1, out2 = js.alloc_output("float32", (N,)), js.alloc_output("float32", (N,))
            outs = [out1, out2]
            js.launch(add, COUNT, DIM, out1, lhs, rhs)  # compile and prepare
            js.launch(add, COUNT, DIM, out2, lhs, rhs)

            def dsl_alternating() -> None:
                outs.reverse()
                js.launch(add, COUNT, DIM, outs[0], lhs, rhs)

            module = rs.compile_nvrtc(source.source)
            function = module.function(source.symbol)
            raw_out = rs.alloc_output("float32", (N,))
            args = raw_args(rs, spec, raw_out, lhs, rhs)
            prepared = rs.prepare(function, raw.LaunchConfig(COUNT, DIM), args)

            def sync() -> None:
                ex.synchronize()
                cupy_sync()

            variants: dict[str, Callable[[], None]] = {
                "raw PreparedLaunch.launch()": prepared.launch,
                "raw PreparedLaunch.launch(args=...)": lambda: prepared.launch(args=args),
                "DSL js.launch, same arguments": lambda: js.launch(add, COUNT, DIM, out1, lhs, rhs),
                "DSL js.launch, alternating outputs": dsl_alternating,
                **cupy_variants(np.int32(N)),
            }
            syncs = rt.stats()["synchronizations"]
            medians = interleaved_medians(variants, opts.rounds, opts.batch, sync)
            syncs = rt.stats()["synchronizations"] - syncs - len(variants)  # minus the warm-up
        expected = np.full(N, 2, np.float32)
        for t in (out1, out2, raw_out):
            np.testing.assert_array_equal(t.download(), expected)

    raw_plain = medians["raw PreparedLaunch.launch()"]
    raw_swap = medians["raw PreparedLaunch.launch(args=...)"]
    same = medians["DSL js.launch, same arguments"]
    alternating = medians["DSL js.launch, alternating outputs"]
    ratios = {
        "DSL same arguments / raw launch()": same / raw_plain,
        "DSL alternating outputs / raw launch(args=...)": alternating / raw_swap,
        "DSL alternating outputs / raw launch()": alternating / raw_plain,
    }
    if "cupyx.jit rawkernel" in medians:
        ratios["cupyx.jit / DSL alternating outputs"] = medians["cupyx.jit rawkernel"] / alternating
    print(
        f"DSL launch cost, median of {opts.rounds} rounds x {opts.batch} launches of a "
        f"{N}-element f32 add ({rt.device_info.name}, python {sys.version.split()[0]})"
    )
    print(f"  {'variant':44s} {'us/launch':>10s}")
    for name, us in medians.items():
        print(f"  {name:44s} {us:10.2f}")
    print(f"  {'ratio (target: DSL <= 1.2x raw)':44s} {'':>10s}")
    for name, ratio in ratios.items():
        print(f"  {name:44s} {ratio:9.2f}x")
    print(
        f"  synchronizations per round: {syncs / opts.rounds:.0f} (the {len(medians)} "
        "timed batches' own waits, outside the timing; none inside the launches)"
    )
    write_json(opts.json, medians, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())

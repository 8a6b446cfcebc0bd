"""Host cost of a cached DSL launch on CUDA against a raw PreparedLaunch of the same kernel.

The add kernel is written once in the DSL; its generated CUDA C is also compiled and prepared in
a raw session, so both sides launch identical device code on the runtime's stream. Rows:

* raw ``PreparedLaunch.launch()`` and ``launch(args=...)`` (the seam's hot path);
* ``js.launch(dsl_add, ...)`` repeating the same arguments (replayed as is) and alternating two
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
from tenferro_host.benchmarks import baselines
from tenferro_host.benchmarks.kernels import dsl_add
from tenferro_host.cuda import raw

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import arguments, interleaved_medians, print_rows, write_json

N = 1024
BLOCK = 256
COUNT = (N // BLOCK, 1, 1)
DIM = (BLOCK, 1, 1)


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


def cupy_variants(syncs: list[Callable[[], None]]) -> dict[str, Callable[[], None]]:
    """cupyx.jit and RawKernel launches of the same add (the suite's baselines, which append
    CuPy's wait to ``syncs``), or nothing without CuPy."""
    try:
        cupyx_add = baselines.cupyx_jit_add(syncs)
    except ImportError as exc:
        print(f"  (CuPy baselines skipped: {exc})")
        return {}
    raw_kernel = baselines.cupy_cases([])[0].fn  # its wait is cupyx's, appended once
    assert raw_kernel is not None
    return {"cupyx.jit rawkernel": cupyx_add, "cupy RawKernel": raw_kernel}


def main() -> int:
    opts = arguments(__doc__)

    rt = tf.Host().backend("cuda")
    lhs = rt.upload(np.ones(N, np.float32))
    rhs = rt.upload(np.ones(N, np.float32))
    spec = dsl_add.specialize(
        [K.ArrayDesc(dtypes.float32, 1)] * 3, {}, "cuda", (rt.device_info.arch,)
    )
    source = generate(spec)
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        with ex.jit("bench.dsl_launch_cost") as js, ex.raw("bench.dsl_launch_cost") as rs:
            out1, out2 = js.alloc_output("float32", (N,)), js.alloc_output("float32", (N,))
            outs = [out1, out2]
            js.launch(dsl_add, COUNT, DIM, out1, lhs, rhs)  # compile and prepare
            js.launch(dsl_add, COUNT, DIM, out2, lhs, rhs)

            def dsl_alternating() -> None:
                outs.reverse()
                js.launch(dsl_add, COUNT, DIM, outs[0], lhs, rhs)

            module = rs.compile_nvrtc(source.source)
            function = module.function(source.symbol)
            raw_out = rs.alloc_output("float32", (N,))
            args = raw_args(rs, spec, raw_out, lhs, rhs)
            prepared = rs.prepare(function, raw.LaunchConfig(COUNT, DIM), args)

            syncs: list[Callable[[], None]] = [ex.synchronize]
            peers = cupy_variants(syncs)

            def sync() -> None:
                for wait in syncs:
                    wait()

            variants: dict[str, Callable[[], None]] = {
                "raw PreparedLaunch.launch()": prepared.launch,
                "raw PreparedLaunch.launch(args=...)": lambda: prepared.launch(args=args),
                "DSL js.launch, same arguments": lambda: js.launch(
                    dsl_add, COUNT, DIM, out1, lhs, rhs
                ),
                "DSL js.launch, alternating outputs": dsl_alternating,
                **peers,
            }
            before = rt.stats()["synchronizations"]
            medians = interleaved_medians(variants, opts.rounds, opts.batch, sync)
            waits = rt.stats()["synchronizations"] - before - len(variants)  # minus the warm-up
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
    print_rows(medians, 44, "{:10.2f}")
    print(f"  {'ratio (target: DSL <= 1.2x raw)':44s} {'':>10s}")
    print_rows(ratios, 44, "{:9.2f}x")
    print(
        f"  synchronizations per round: {waits / opts.rounds:.0f} (the {len(medians)} "
        "timed batches' own waits, outside the timing; none inside the launches)"
    )
    write_json(opts.json, medians, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())

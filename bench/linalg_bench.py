"""linalg on an H200: cuBLAS through the public seam against CuPy, in one process.

Rows (interleaved rounds, medians; CuPy runs the same operand values in the same column-major
layout on a non-blocking stream of its own):

* ``linalg.matmul`` 4096^3 f32 and f16 (``host.run``, a session per call) vs ``cupy.matmul``:
  throughput ratio, target >= 0.98x. Each sample enqueues ``--reps`` products and waits once.
  The target compares with CuPy on column-major operands (the tensors' layout, for which CuPy
  calls cuBLAS with both operands transposed); CuPy on row-major copies is reported beside.
* a 3-tensor contraction chain, ``linalg`` ``einsum_chain`` (one session, one
  ``linalg.einsum`` per pair) vs ``cupy.einsum`` of the same spec: reported ratio.
* host cost per ``linalg.matmul`` call at 64x64 (``host.run``, and ``ex.run`` inside one
  session) vs ``cupy.matmul``: microseconds per call, synchronization outside the timing.
* vendor synchronizations: for each cuda variant, how many of ``--probe`` calls returned only
  after a 50 ms kernel queued before them had finished (the call blocked the host inside the
  library), beside the host's own ``synchronizations`` counter for the same calls.

    python bench/linalg_bench.py [--rounds 15] [--reps 10] [--json PATH]

The JSON also goes to $OUT/linalg_bench.json when $OUT is set. Needs CuPy (cupy-cuda13x).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tenferro_host_linalg import einsum_chain

import tenferro_host as tf
from tenferro_host.benchmarks.kernel_rows import wall_seconds
from tenferro_host.cuda import raw

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import interleaved, per_launch_us

SPIN_SRC = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""
CHAIN_SPEC = "iaj,jbk,kcl->iabcl"  # three MPS-like tensors: bond 128, physical 16


def gemm_rows(
    host: tf.Host,
    rt: Any,
    cupy: Any,
    stream: Any,
    opts: argparse.Namespace,
    rng: np.random.Generator,
) -> dict[str, Any]:
    n = 4096
    out: dict[str, Any] = {}
    # ~25 ms of GEMMs per sample, so the idle device before the first call of a sample is noise
    reps = {"float32": opts.reps, "float16": opts.reps * 8}
    for dtype in ("float32", "float16"):
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        ta, tb = rt.upload(a), rt.upload(b)
        with stream:  # the same values; column-major like the tensors, and row-major
            ca, cb = cupy.asfortranarray(cupy.asarray(a)), cupy.asfortranarray(cupy.asarray(b))
            ra, rb = cupy.ascontiguousarray(ca), cupy.ascontiguousarray(cb)

        def cupy_matmul(x: Any, y: Any) -> Callable[[], Any]:
            def call() -> Any:
                with stream:
                    return cupy.matmul(x, y)

            return call

        def linalg_matmul(ta: Any = ta, tb: Any = tb) -> Any:
            return host.run("linalg.matmul", ta, tb)

        medians = interleaved(
            {
                "linalg": linalg_matmul,
                "cupy": cupy_matmul(ca, cb),
                "cupy_row_major": cupy_matmul(ra, rb),
            },
            opts.rounds,
            wall_seconds,
            reps[dtype],
            {
                "linalg": rt.synchronize,
                "cupy": stream.synchronize,
                "cupy_row_major": stream.synchronize,
            },
        )
        flops = 2 * n**3
        row = {f"{k}_ms": v * 1e3 for k, v in medians.items()}
        row |= {f"{k}_tflops": flops / v / 1e12 for k, v in medians.items()}
        row["throughput_ratio"] = medians["cupy"] / medians["linalg"]  # same layout
        row["throughput_ratio_vs_row_major"] = medians["cupy_row_major"] / medians["linalg"]
        row["target"] = 0.98
        row["meets_target"] = row["throughput_ratio"] >= 0.98
        got = host.run("linalg.matmul", ta, tb).download()[:64, :64].astype(np.float64)
        want = a[:64].astype(np.float64) @ b[:, :64].astype(np.float64)
        row["max_rel_err_64x64_corner"] = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        out[f"matmul_4096_{dtype}"] = row
    return out


def chain_row(
    host: tf.Host,
    rt: Any,
    cupy: Any,
    stream: Any,
    opts: argparse.Namespace,
    rng: np.random.Generator,
) -> dict[str, Any]:
    bond, phys = 128, 16
    arrays = [rng.standard_normal((bond, phys, bond)).astype(np.float32) for _ in range(3)]
    tensors = [rt.upload(x) for x in arrays]
    with stream:
        cupys = [cupy.asfortranarray(cupy.asarray(x)) for x in arrays]

    def linalg_chain() -> Any:
        with rt.session() as s:
            return einsum_chain(s.exec_session(), CHAIN_SPEC, *tensors)

    def cupy_chain() -> Any:
        with stream:
            return cupy.einsum(CHAIN_SPEC, *cupys)

    medians = interleaved(
        {"linalg": linalg_chain, "cupy": cupy_chain},
        opts.rounds,
        wall_seconds,
        opts.reps,
        {"linalg": rt.synchronize, "cupy": stream.synchronize},
    )
    got = linalg_chain().download()
    want = cupy_chain().get()  # 268M elements: checked against CuPy, not a CPU einsum
    return {
        "spec": CHAIN_SPEC,
        "shapes": [list(x.shape) for x in arrays],
        "dtype": "float32",
        "linalg_ms": medians["linalg"] * 1e3,
        "cupy_ms": medians["cupy"] * 1e3,
        "throughput_ratio": medians["cupy"] / medians["linalg"],
        "max_rel_diff_vs_cupy": float(np.max(np.abs(got - want)) / np.max(np.abs(want))),
    }


def overhead_row(
    host: tf.Host, rt: Any, cupy: Any, stream: Any, opts: argparse.Namespace
) -> dict[str, Any]:
    a = np.ones((64, 64), np.float32)
    ta = rt.upload(a)
    with stream:  # current for the whole row: CuPy's calls pay no stream switch (its best case)
        ca = cupy.asfortranarray(cupy.asarray(a))
        return _overhead(host, rt, ta, lambda: cupy.matmul(ca, ca), stream, opts)


def _overhead(
    host: tf.Host,
    rt: Any,
    ta: Any,
    cupy_matmul: Callable[[], Any],
    stream: Any,
    opts: argparse.Namespace,
) -> dict[str, Any]:
    medians = interleaved(
        {"linalg host.run": lambda: host.run("linalg.matmul", ta, ta), "cupy.matmul": cupy_matmul},
        opts.rounds,
        per_launch_us,
        200,
        {"linalg host.run": rt.synchronize, "cupy.matmul": stream.synchronize},
    )
    with rt.session() as s:  # ex.run inside one open session (host.run cannot run in it)
        ex = s.exec_session()
        medians |= interleaved(
            {"linalg ex.run (one session)": lambda: ex.run("linalg.matmul", ta, ta)},
            opts.rounds,
            per_launch_us,
            200,
            {"linalg ex.run (one session)": ex.synchronize},
        )
    return {
        "us_per_call": medians,
        "ratio_host_run_vs_cupy": medians["linalg host.run"] / medians["cupy.matmul"],
        "ratio_ex_run_vs_cupy": medians["linalg ex.run (one session)"] / medians["cupy.matmul"],
    }


def vendor_sync_rows(host: tf.Host, rt: Any, cupy: Any, probe: int) -> dict[str, Any]:
    """Per op: calls that blocked until earlier queued work finished, and host-counted syncs."""
    rng = np.random.default_rng(3)
    m = rt.upload(rng.standard_normal((256, 256)).astype(np.float32))
    x = rt.upload(rng.standard_normal((64, 32, 16)).astype(np.float32))
    calls: dict[str, Callable[[Any], Any]] = {
        "linalg.matmul": lambda ex: ex.run("linalg.matmul", m, m),
        "linalg.batched_matmul": lambda ex: ex.run("linalg.batched_matmul", x, x.permute(1, 0, 2)),
        "linalg.tensordot": lambda ex: ex.run("linalg.tensordot", m, m, axes=1),
        "linalg.einsum": lambda ex: ex.run("linalg.einsum", m, m, spec="ij,kj->ik"),
        "linalg.sum": lambda ex: ex.run("linalg.sum", x, axis=(0, 2)),
        "linalg.norm": lambda ex: ex.run("linalg.norm", m),
        "linalg.qr": lambda ex: ex.run("linalg.qr", m),
        "linalg.svd": lambda ex: ex.run("linalg.svd", m),
    }
    rows = {}
    for name, call in calls.items():
        with rt.session() as s:  # warm-up: CuPy compiles its kernels on first use
            call(s.exec_session())
        blocked = counted = 0
        for _ in range(probe):
            rt.synchronize()
            before = rt.stats()["synchronizations"]
            with rt.session() as s:
                ex = s.exec_session()
                with ex.raw("bench.linalg.spin") as rs:
                    spin = rs.resource(("bench", "spin"), lambda rs=rs: rs.compile_nvrtc(SPIN_SRC))
                    rs.launch(spin.function("spin"), raw.LaunchConfig(1, 1), [raw.u64(50_000_000)])
                    marker = cupy.cuda.Event(disable_timing=True)
                    marker.record(cupy.cuda.ExternalStream(rs.stream.native_handle_unsafe()))
                call(ex)
                blocked += bool(marker.done)
            counted += rt.stats()["synchronizations"] - before
        rows[name] = {"calls": probe, "blocked_host": blocked, "host_counted_syncs": counted}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--probe", type=int, default=3)
    parser.add_argument("--json")
    opts = parser.parse_args()
    import cupy

    host = tf.Host()
    rt = host.backend("cuda")
    started = time.perf_counter()
    with cupy.cuda.Device(rt.device_info.ordinal.ordinal):
        stream = cupy.cuda.Stream(non_blocking=True)
        rng = np.random.default_rng(0)
        report: dict[str, Any] = {
            "device": rt.device_info.name,
            "cupy": cupy.__version__,
            "cupy_compute_type_env": os.environ.get("CUPY_TF32", ""),
        }
        report |= gemm_rows(host, rt, cupy, stream, opts, rng)
        report["chain"] = chain_row(host, rt, cupy, stream, opts, rng)
        report["overhead_64x64"] = overhead_row(host, rt, cupy, stream, opts)
        report["vendor_syncs"] = vendor_sync_rows(host, rt, cupy, opts.probe)
    report["bench_seconds"] = time.perf_counter() - started
    text = json.dumps(report, indent=2)
    print(text)
    for path in filter(
        None,
        (opts.json, os.environ.get("OUT") and os.path.join(os.environ["OUT"], "linalg_bench.json")),
    ):
        with open(path, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

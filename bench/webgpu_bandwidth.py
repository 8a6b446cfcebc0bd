"""Add-kernel bandwidth: the DSL on WebGPU vs the CUDA JIT path, side by side in one process.

One DSL kernel object (the suite's ``dsl_add``) runs on every available backend among ``webgpu`` and
``cuda``: ``out = lhs + rhs`` over 2^N float32 elements (N = 28 by default). A sample is
``--launches`` launches in one JIT session followed by one ``synchronize()``; its time divided by
the launch count is one add. Bandwidth counts bytes read plus written (3 * 4 * n). The report
gives medians over ``--repeats`` samples and the ratio WebGPU / CUDA when both ran.

    python bench/webgpu_bandwidth.py                 # 2^28 elements (the H200 run)
    python bench/webgpu_bandwidth.py --log2-n 20     # a small run (software adapter)
    python bench/webgpu_bandwidth.py --json          # one JSON document on stdout
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import numpy as np

import tenferro_host as tf
from tenferro_host.benchmarks.kernel_rows import exec_session, jit_samples
from tenferro_host.benchmarks.kernels import dsl_add


def measure(host: tf.Host, kind: str, n: int, launches: int, repeats: int) -> dict[str, Any]:
    """Median seconds per add on backend ``kind``, with the result checked once."""
    rt = host.backend(kind)
    rng = np.random.default_rng(0)
    lhs_host = rng.standard_normal(n, dtype=np.float32)
    rhs_host = rng.standard_normal(n, dtype=np.float32)
    lhs, rhs = rt.upload(lhs_host), rt.upload(rhs_host)
    out = rt.empty("float32", (n,))
    with rt.session() as s, exec_session(kind, s).jit("bench.add") as js:
        count, dim = js.cube_count_1d(n), js.cube_dim_1d()  # the backend's 1-D grid for n

    def launch(js: Any) -> None:
        js.launch(dsl_add, count, dim, out, lhs, rhs)

    times = jit_samples(rt, kind, "bench.add", launch, launches, repeats)
    np.testing.assert_array_equal(out.download(), lhs_host + rhs_host)
    median = statistics.median(times)
    return {
        "backend": rt.name,
        "device": str(rt.device),
        "median_ms": median * 1e3,
        "min_ms": min(times) * 1e3,
        "gb_per_s": 3 * 4 * n / median / 1e9,
        "samples": repeats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2-n", type=int, default=28, help="2^N float32 elements (28)")
    parser.add_argument("--launches", type=int, default=50, help="launches per sample (50)")
    parser.add_argument("--repeats", type=int, default=10, help="samples per backend (10)")
    parser.add_argument("--json", action="store_true", help="print one JSON document only")
    args = parser.parse_args(argv)
    n = 1 << args.log2_n
    host = tf.Host()
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for kind in ("webgpu", "cuda"):
        status = host.backend_status(kind)
        if not status.available:
            skipped[kind] = status.reason or "unavailable"
            continue
        try:
            results[kind] = measure(host, kind, n, args.launches, args.repeats)
        except tf.TenferroError as exc:  # e.g. 2^N elements over this adapter's binding limit
            skipped[kind] = f"{type(exc).__name__}: {exc}"
    ratio = (
        results["webgpu"]["gb_per_s"] / results["cuda"]["gb_per_s"]
        if "webgpu" in results and "cuda" in results
        else None
    )
    report = {"elements": n, "results": results, "skipped": skipped, "webgpu_over_cuda": ratio}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"add kernel, {n} float32 elements (2^{args.log2_n}), "
            f"{args.launches} launches per sample, median of {args.repeats}"
        )
        for kind, r in results.items():
            print(
                f"  {kind:7s} {r['device']:50s} {r['median_ms']:9.3f} ms  {r['gb_per_s']:8.1f} GB/s"
            )
        for kind, why in skipped.items():
            print(f"  {kind:7s} skipped: {why}")
        if ratio is not None:
            print(f"  WebGPU / CUDA bandwidth ratio: {ratio:.3f}")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())

"""DSL kernels against CuPy on one GPU: sums of f32, the tiled f32 GEMM and the f16 GEMM.

Rows (each also on WebGPU, as a ratio to the CUDA JIT run of the same kernel object):

* ``sum``: the DSL sum of 2^N float32 (N = 28) — a grid-stride loop per unit, a tree in shared
  memory per cube, one ``K.atomic_add`` per cube — against ``cupy.sum``, in GB/s of input read
  (target: DSL >= 0.9x CuPy); ``load4`` rows: the same with 16-byte ``K.load4`` loads;
  ``subgroup`` rows: those loads reduced by ``K.subgroup_add`` (target: >= 0.98x CuPy; on
  WebGPU >= 0.6x the CUDA run);
* ``matmul``: the DSL's tiled f32 GEMM (:mod:`tenferro_host.benchmarks.gemm`) of two M x M
  float32 matrices (M = 4096) with its portable config (64 x 64 tiles in shared memory, 4 x 4
  outputs per unit, ``K.fma``) against ``cupy.matmul`` (cuBLAS SGEMM; CuPy's default compute
  type, no TF32 unless CUPY_TF32 is set), in TFLOP/s (target: DSL >= 0.4x CuPy; reported
  whatever it is); ``registers BMxBN`` rows: the register-tiled GEMM
  (:mod:`tenferro_host.benchmarks.gemm_registers`, 8 x 8 outputs per unit in ``K.registers``,
  double-buffered slices) with each of its configs alone; ``autotuned`` rows: that GEMM with
  the config ``@K.autotune`` picks at its first launch (checked, not timed; target: >= 0.75x
  CuPy, and never below the best config alone);
* ``gemm_f16``: the DSL's f16 GEMMs on tensor cores (f32 accumulate) of two M x M float16
  matrices (``--m-f16``, 4096) against ``cupy.matmul`` of the same f16 arrays (cuBLAS), CUDA
  only: ``DSL cuda`` is the m16n8k16 GEMM (:mod:`tenferro_host.benchmarks.gemm_mma`,
  ``mma.sync`` and ``ldmatrix``) autotuned (target: >= 0.6x cuBLAS, and never below the best
  variant alone); ``mma ...`` rows each of its configs alone; ``wmma step=..`` rows the wmma
  GEMM (:mod:`tenferro_host.benchmarks.gemm_f16`) at each slice depth.

A sample is ``--launches`` launches in one JIT session followed by one ``synchronize()`` (CuPy:
the same launches, then a device synchronize); the report gives medians of ``--repeats``
samples. Every result is checked once against numpy (the sum) or CuPy (the matmul) before
timing. A missing backend or library gives a ``not run`` row with the reason. About a minute on
an H200.

    python bench/dsl_vs_cupy.py                      # the H200 run
    python bench/dsl_vs_cupy.py --log2-n 20 --m 256  # a small run
    python bench/dsl_vs_cupy.py --json PATH          # also write the rows as JSON
                                                     # (default: $OUT/dsl_vs_cupy.json)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.benchmarks import attention, gemm, gemm_f16, gemm_mma, gemm_registers
from tenferro_host.benchmarks.dsl_sums import (
    SUM_CUBE,
    SUM_CUBES,
    dsl_sum,
    dsl_sum4,
    dsl_sum_subgroup,
)
from tenferro_host.benchmarks.kernel_rows import (
    cupy_seconds,
    jit_seconds,
    launch_once,
    row,
    run_variant,
    torch_seconds,
)
from tenferro_host.benchmarks.report import target_table, verdict

#: The GEMM's portable tile config (64 x 64 blocks, 16 deep, 4 x 4 outputs per unit): the
#: ``matmul`` rows' kernel before autotuning.
PORTABLE = gemm.GEMM_CONFIGS[0]
MATMUL_BASELINE = "cupy.matmul (cuBLAS SGEMM)"
F16_BASELINE = "cupy.matmul f16 (cuBLAS)"
F16_TARGET = 0.6  # DSL cuda / F16_BASELINE
AUTOTUNED_TARGET = 0.75  # DSL cuda autotuned / MATMUL_BASELINE
ATTENTION_BASELINE = "torch sdpa f16"


def sum_seconds(
    rt: Any,
    kind: str,
    x_host: np.ndarray,
    launches: int,
    repeats: int,
    cubes: int,
    kernel: K.Kernel,
) -> float:
    """Seconds per launch of the sum ``kernel`` over ``x_host``, after one checked launch."""
    x = rt.upload(x_host)
    out = rt.upload(np.zeros(1, np.float32))

    def launch(js: Any) -> None:
        js.launch(kernel, cubes, SUM_CUBE, out, x)

    launch_once(rt, kind, "bench.dsl.sum", launch)
    got = float(out.download()[0])
    want = float(x_host.sum(dtype=np.float64))
    if not abs(got - want) <= 1e-3 * float(np.abs(x_host).sum(dtype=np.float64)):
        raise AssertionError(f"DSL sum on {kind} is {got}, numpy says {want}")
    return jit_seconds(rt, kind, "bench.dsl.sum", launch, launches, repeats)


def register_variants() -> tuple[tuple[str, Callable[[Any, Any, Any, Any], None]], ...]:
    """The ``matmul`` rows of the register GEMM's configs, each alone (suffix, launch)."""
    return tuple(
        (
            f" registers {cfg['BM']}x{cfg['BN']}x{cfg['BK']}",
            partial(gemm_registers.REGISTER_GEMM.launch, config=cfg),
        )
        for cfg in gemm_registers.REGISTER_CONFIGS
    )


def matmul_seconds(
    rt: Any,
    kind: str,
    a_host: np.ndarray,
    b_host: np.ndarray,
    expected: np.ndarray | None,
    launches: int,
    repeats: int,
    launch: Callable[[Any, Any, Any, Any], None],
) -> float:
    """``launch(js, c, a, b)``'s seconds; its first launch (an autotuned kernel's tuning) is
    checked and not timed."""
    m = a_host.shape[0]
    a, b = rt.upload(a_host), rt.upload(b_host)
    c = rt.empty("float32", (m, m))
    launch_once(rt, kind, "bench.dsl.matmul", lambda js: launch(js, c, a, b))
    if expected is not None:
        np.testing.assert_allclose(c.download(), expected, rtol=1e-3, atol=1e-3 * np.sqrt(m))
    return jit_seconds(
        rt, kind, "bench.dsl.matmul", lambda js: launch(js, c, a, b), launches, repeats
    )


def gemm_f16_seconds(
    rt: Any,
    a_host: np.ndarray,
    b_host: np.ndarray,
    expected: np.ndarray,
    launches: int,
    repeats: int,
    launch: Callable[[Any, Any, Any, Any], None],
) -> float:
    """Seconds per ``launch(js, c, a, b)`` of an f16 GEMM on the CUDA runtime ``rt``, after
    one checked run (an autotuned kernel's tuning)."""
    m, n = a_host.shape[0], b_host.shape[1]
    a, b = rt.upload(a_host), rt.upload(b_host)
    c = rt.empty("float32", (m, n))
    launch_once(rt, "cuda", "bench.dsl.gemm_f16", lambda js: launch(js, c, a, b))
    np.testing.assert_allclose(c.download(), expected, rtol=1e-2, atol=1e-2 * np.sqrt(m))
    return jit_seconds(
        rt, "cuda", "bench.dsl.gemm_f16", lambda js: launch(js, c, a, b), launches, repeats
    )


def f16_variants() -> tuple[tuple[str, Callable[[Any, Any, Any, Any], None]], ...]:
    """The ``gemm_f16`` rows on CUDA (suffix, launch): the m16n8k16 GEMM autotuned (the row
    the target is read from), each of its configs alone, and the wmma GEMM at each depth."""
    mma = tuple(
        (
            " mma {}x{}x{} {}w {}s".format(
                cfg["BM"], cfg["BN"], cfg["BK"], cfg["WX"] * cfg["WY"], cfg["stages"]
            ),
            partial(gemm_mma.MMA_GEMM.launch, config=cfg),
        )
        for cfg in gemm_mma.MMA_CONFIGS
    )
    wmma = tuple((f" wmma step={step}", partial(_launch_wmma, step)) for step in gemm_f16.STEPS)
    return (("", gemm_mma.MMA_GEMM.launch_tuned), *mma, *wmma)


def _launch_wmma(step: int, js: Any, c: Any, a: Any, b: Any) -> None:
    m, n = c.shape
    count = gemm_f16.gemm_f16_count(m, n)
    js.launch(gemm_f16.gemm_f16, count, gemm_f16.UNITS, c, a, b, step=step)


def add_cupy_row(
    rows: list[dict[str, Any]],
    name: str,
    variant: str,
    work: float,
    unit: str,
    baseline: Callable[[], Any],
    args: Any,
) -> None:
    """The CuPy row ``variant`` of ``name``: ``baseline()`` timed as CuPy's own calls are."""
    run_variant(
        rows, name, variant, work, unit, lambda: cupy_seconds(baseline, args.launches, args.repeats)
    )


def add_f16_rows(rows: list[dict[str, Any]], host: Any, m: int, args: Any) -> None:
    """The ``gemm_f16`` rows: ``cupy.matmul`` of f16 (cuBLAS, f32 accumulate) and the DSL on
    CUDA (each of :func:`f16_variants`), checked against the f32 product of the same f16
    inputs. WebGPU's row is not run: its fragments are loops over
    private copies (no cooperative matrix in wgpu), a correctness path, not a tensor-core one."""
    tflop = 2 * m**3 / 1e12
    rng = np.random.default_rng(1)
    a_host = rng.standard_normal((m, m)).astype(np.float16)
    b_host = rng.standard_normal((m, m)).astype(np.float16)
    expected: np.ndarray | None = None
    try:
        import cupy

        ac, bc = cupy.asarray(a_host), cupy.asarray(b_host)
        expected = cupy.asnumpy(cupy.matmul(ac.astype(cupy.float32), bc.astype(cupy.float32)))
        matmul = partial(cupy.matmul, ac, bc)
        add_cupy_row(rows, "gemm_f16", F16_BASELINE, tflop, "TFLOP/s", matmul, args)
    except ImportError as exc:
        rows.append(row("gemm_f16", F16_BASELINE, None, tflop, "TFLOP/s", f"ImportError: {exc}"))
        if m <= 1024:
            expected = a_host.astype(np.float32) @ b_host.astype(np.float32)
    rows.append(
        row("gemm_f16", "DSL webgpu", None, tflop, "TFLOP/s", "no tensor-core path on WebGPU")
    )
    variants = f16_variants()
    status = host.backend_status("cuda")
    if not status.available or expected is None:
        reason = status.reason or "no reference product (no cupy, and m > 1024)"
        for suffix, _ in variants:
            rows.append(row("gemm_f16", f"DSL cuda{suffix}", None, tflop, "TFLOP/s", reason))
        return
    rt = host.backend("cuda")
    for suffix, launch in variants:
        run_variant(
            rows,
            "gemm_f16",
            f"DSL cuda{suffix}",
            tflop,
            "TFLOP/s",
            lambda launch=launch: gemm_f16_seconds(
                rt, a_host, b_host, expected, args.launches, args.repeats, launch
            ),
        )


def attention_seconds(
    rt: Any, qkv: list[np.ndarray], expected: np.ndarray, launches: int, repeats: int
) -> float:
    """Seconds per launch of the DSL's fused attention over ``qkv`` (each ``(heads, S, D)``
    f16) on the CUDA runtime ``rt``, after one checked launch."""
    heads, seq, d = qkv[0].shape
    q, k, v = (rt.upload(x.reshape(-1)) for x in qkv)
    o = rt.empty("float32", (heads * seq * d,))
    scale = np.float32(1 / np.sqrt(d))
    count = attention.attention_count(seq, heads)

    def launch(js: Any) -> None:
        js.launch(attention.attention, count, attention.UNITS, o, q, k, v, np.uint32(seq), scale)

    launch_once(rt, "cuda", "bench.dsl.attention", launch)
    np.testing.assert_allclose(o.download().reshape(heads, seq, d), expected, atol=2e-3, rtol=0)
    return jit_seconds(rt, "cuda", "bench.dsl.attention", launch, launches, repeats)


def add_attention_rows(rows: list[dict[str, Any]], host: Any, args: Any) -> None:
    """The ``attention`` rows: torch's ``scaled_dot_product_attention`` of f16 ``(1, heads,
    S, D)`` tensors (its fused kernels) and the DSL's fused attention of the same values (f32
    out), checked against torch's f32 result; TFLOP/s of the two products."""
    heads, seq, d = args.attention_heads, args.attention_seq, attention.D
    tflop = 4 * heads * seq * seq * d / 1e12
    rng = np.random.default_rng(2)
    qkv = [rng.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3)]
    expected: np.ndarray | None = None
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError("torch has no CUDA device here")
        tq, tk, tv = (torch.from_numpy(x).cuda()[None] for x in qkv)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        exact = sdpa(tq.float(), tk.float(), tv.float())
        expected = exact[0].cpu().numpy()
        run_variant(
            rows,
            "attention",
            ATTENTION_BASELINE,
            tflop,
            "TFLOP/s",
            lambda: torch_seconds(partial(sdpa, tq, tk, tv), args.launches, args.repeats),
        )
    except ImportError as exc:
        rows.append(row("attention", ATTENTION_BASELINE, None, tflop, "TFLOP/s", str(exc)))
    status = host.backend_status("cuda")
    if not status.available or expected is None:
        reason = status.reason or "no reference (torch with CUDA)"
        rows.append(row("attention", "DSL cuda", None, tflop, "TFLOP/s", reason))
        return
    rt = host.backend("cuda")
    run_variant(
        rows,
        "attention",
        "DSL cuda",
        tflop,
        "TFLOP/s",
        lambda: attention_seconds(rt, qkv, expected, args.launches, args.repeats),
    )


def main(argv: list[str] | None = None) -> int:  # noqa: C901 - one bench row after another
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2-n", type=int, default=28, help="sum of 2^N float32 (28)")
    parser.add_argument("--m", type=int, default=4096, help="matmul of M x M float32 (4096)")
    parser.add_argument("--m-f16", type=int, default=4096, help="f16 GEMM of M x M (4096)")
    parser.add_argument("--attention-seq", type=int, default=4096, help="keys per head (4096)")
    parser.add_argument("--attention-heads", type=int, default=16, help="heads (16)")
    parser.add_argument("--sum-cubes", type=int, default=SUM_CUBES, help="cubes of the sum")
    parser.add_argument("--launches", type=int, default=10, help="launches per sample (10)")
    parser.add_argument("--repeats", type=int, default=5, help="samples per variant (5)")
    parser.add_argument("--json", help="write the rows here (default: $OUT/dsl_vs_cupy.json)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    n, m = 1 << args.log2_n, args.m
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(n, dtype=np.float32)
    a_host = rng.standard_normal((m, m), dtype=np.float32)
    b_host = rng.standard_normal((m, m), dtype=np.float32)
    host = tf.Host()
    kinds = {k: host.backend_status(k) for k in ("cuda", "webgpu")}
    gb, tflop = 4 * n / 1e9, 2 * m**3 / 1e12
    rows: list[dict[str, Any]] = []
    expected: np.ndarray | None = None

    try:
        import cupy

        xc = cupy.asarray(x_host)
        add_cupy_row(rows, "sum", "cupy.sum", gb, "GB/s", partial(cupy.sum, xc), args)
        ac, bc = cupy.asarray(a_host), cupy.asarray(b_host)
        expected = cupy.asnumpy(cupy.matmul(ac, bc))
        matmul = partial(cupy.matmul, ac, bc)
        add_cupy_row(rows, "matmul", MATMUL_BASELINE, tflop, "TFLOP/s", matmul, args)
    except ImportError as exc:
        for name, variant, work, unit in (
            ("sum", "cupy.sum", gb, "GB/s"),
            ("matmul", MATMUL_BASELINE, tflop, "TFLOP/s"),
        ):
            rows.append(row(name, variant, None, work, unit, f"ImportError: {exc}"))
    if expected is None and m <= 1024:
        expected = a_host.astype(np.float64) @ b_host.astype(np.float64)

    sums = (("", dsl_sum), (" load4", dsl_sum4), (" subgroup", dsl_sum_subgroup))  # the rows
    matmuls = (
        ("", partial(gemm.TILED_GEMM.launch, config=PORTABLE)),
        *register_variants(),
        (" autotuned", gemm_registers.REGISTER_GEMM.launch_tuned),
    )
    for kind, status in kinds.items():
        if not status.available:
            reason = status.reason or "unavailable"
            for suffix, _ in sums:
                rows.append(row("sum", f"DSL {kind}{suffix}", None, gb, "GB/s", reason))
            for suffix, _ in matmuls:
                rows.append(row("matmul", f"DSL {kind}{suffix}", None, tflop, "TFLOP/s", reason))
            continue
        rt = host.backend(kind)
        for suffix, kernel in sums:
            run_variant(
                rows,
                "sum",
                f"DSL {kind}{suffix}",
                gb,
                "GB/s",
                lambda rt=rt, kind=kind, kernel=kernel: sum_seconds(
                    rt, kind, x_host, args.launches, args.repeats, args.sum_cubes, kernel
                ),
            )
        for suffix, launch in matmuls:
            run_variant(
                rows,
                "matmul",
                f"DSL {kind}{suffix}",
                tflop,
                "TFLOP/s",
                lambda rt=rt, kind=kind, launch=launch: matmul_seconds(
                    rt, kind, a_host, b_host, expected, args.launches, args.repeats, launch
                ),
            )
    add_f16_rows(rows, host, args.m_f16, args)
    add_attention_rows(rows, host, args)
    for tuned_kernel in (gemm_registers.REGISTER_GEMM.tuned, gemm_mma.MMA_GEMM.tuned):
        for choice in tuned_kernel.choices().values():
            print(f"  autotuned: {choice.config} ({choice.source}; medians {choice.timings})")

    def rate(name: str, variant: str) -> float | None:
        for r in rows:
            if r["benchmark"] == name and r["variant"] == variant and r["status"] == "ok":
                return r["GB/s" if name == "sum" else "TFLOP/s"]
        return None

    ratios: dict[str, dict[str, Any]] = {}
    for name, baseline, target in (
        ("sum", "cupy.sum", 0.9),
        ("matmul", MATMUL_BASELINE, 0.4),
        ("gemm_f16", F16_BASELINE, F16_TARGET),
        ("attention", ATTENTION_BASELINE, None),
    ):
        cuda, base, webgpu = rate(name, "DSL cuda"), rate(name, baseline), rate(name, "DSL webgpu")
        ratios[name] = {
            f"DSL cuda / {baseline}": None if cuda is None or base is None else cuda / base,
            "target": target,
            "DSL webgpu / DSL cuda": None if cuda is None or webgpu is None else webgpu / cuda,
        }
        if name == "sum":
            vec = rate(name, "DSL cuda load4")
            ratios[name][f"DSL cuda load4 / {baseline}"] = (
                None if vec is None or base is None else vec / base
            )
    warp, warp_webgpu, base = (
        rate("sum", "DSL cuda subgroup"),
        rate("sum", "DSL webgpu subgroup"),
        rate("sum", "cupy.sum"),
    )
    ratios["sum subgroup"] = {
        "DSL cuda subgroup / cupy.sum": None if warp is None or base is None else warp / base,
        "target": 0.98,
        "DSL webgpu subgroup / DSL cuda subgroup": (
            None if warp is None or warp_webgpu is None else warp_webgpu / warp
        ),
        "webgpu target": 0.6,
    }
    tuned, base = rate("matmul", "DSL cuda autotuned"), rate("matmul", MATMUL_BASELINE)
    tuned_webgpu = rate("matmul", "DSL webgpu autotuned")
    ratios["matmul autotuned"] = {
        f"DSL cuda autotuned / {MATMUL_BASELINE}": (
            None if tuned is None or base is None else tuned / base
        ),
        "target": AUTOTUNED_TARGET,
        "DSL webgpu autotuned / DSL cuda autotuned": (
            None if tuned is None or tuned_webgpu is None else tuned_webgpu / tuned
        ),
    }
    alone = [rate("matmul", f"DSL cuda{suffix}") for suffix, _ in register_variants()]
    best = max((r for r in alone if r is not None), default=None)
    ratios["matmul tuned vs alone"] = {  # never slower, within the samples' noise
        "DSL cuda autotuned / its best config alone": (
            None if tuned is None or best is None else tuned / best
        ),
        "target": 0.97,
    }
    mma_alone = [rate("gemm_f16", f"DSL cuda{suffix}") for suffix, _ in f16_variants()[1:]]
    mma_best = max((r for r in mma_alone if r is not None), default=None)
    mma_tuned = rate("gemm_f16", "DSL cuda")
    ratios["gemm_f16 tuned vs alone"] = {
        "DSL cuda autotuned / its best variant alone": (
            None if mma_tuned is None or mma_best is None else mma_tuned / mma_best
        ),
        "target": 0.97,
    }
    report = {
        "sum_elements": n,
        "matmul_m": m,
        "gemm_f16_m": args.m_f16,
        "launches": args.launches,
        "repeats": args.repeats,
        "rows": rows,
        "ratios": ratios,
        "seconds": time.perf_counter() - began,
    }
    print(
        f"DSL v2 bench: sum of {n} f32 (2^{args.log2_n}), matmul {m}^3 f32; median of "
        f"{args.repeats} samples x {args.launches} launches"
    )
    for r in rows:
        unit = "GB/s" if r["benchmark"] == "sum" else "TFLOP/s"
        figure = "" if r[unit] is None else f"{r['ms']:9.3f} ms {r[unit]:9.2f} {unit}"
        print(f"  {r['benchmark']:7s} {r['variant']:30s} {figure or r['status']}")
    targets = []
    for name, values in ratios.items():
        for key, value in values.items():
            if "target" in key:
                continue
            goal = values["target"] if key.startswith("DSL cuda") else values.get("webgpu target")
            if goal is None:
                print(f"  {name:12s} {key:40s} {'n/a' if value is None else f'{value:.3f}'}")
            else:
                targets.append(verdict(f"{name}: {key}", value, ">=", goal))
    report["targets"] = targets
    print("\n".join(target_table(targets)))
    print(f"  total {report['seconds']:.1f} s")
    path = args.json or (
        os.path.join(os.environ["OUT"], "dsl_vs_cupy.json") if os.environ.get("OUT") else None
    )
    if path:
        with open(path, "w") as fh:
            json.dump(report, fh, indent=2)
    wrong = any(r["status"].startswith("WRONG") for r in rows)
    return 1 if wrong or not any(r["status"] == "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

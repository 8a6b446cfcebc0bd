"""The autotuned f32 GEMM rows of ``bench/dsl_v2_bench.py``: ``matmul`` variants
``DSL cuda autotuned`` and ``DSL webgpu autotuned``.

The kernel is :mod:`tenferro_host.benchmarks.gemm` (4 x 4 outputs per unit, tile sizes from
64 x 64 to 128 x 128 chosen by ``@K.autotune`` on the first launch, or read from the kernel
cache when an earlier run tuned on this machine). The first launch (the tuning) is checked
against the reference and not timed; the chosen config, where it came from and each config's
median are printed. Target: >= 0.75x ``cupy.matmul`` (cuBLAS SGEMM) on CUDA.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from tenferro_host.benchmarks import gemm

BASELINE = "cupy.matmul (cuBLAS SGEMM)"
TARGET = 0.75


def launch_autotuned(js: Any, c: Any, a: Any, b: Any) -> None:
    gemm.launch_gemm(js, gemm.gemm, c, a, b)


def add_rows(
    rows: list[dict[str, Any]],
    host: Any,
    a_host: np.ndarray,
    b_host: np.ndarray,
    expected: np.ndarray | None,
    args: Any,
    bench: ModuleType,
) -> None:
    """One autotuned row per backend kind, through ``bench``'s timing and row helpers."""
    tflop = 2 * a_host.shape[0] ** 3 / 1e12
    for kind in ("cuda", "webgpu"):
        variant = f"DSL {kind} autotuned"
        status = host.backend_status(kind)
        if not status.available:
            rows.append(bench.row("matmul", variant, None, tflop, "TFLOP/s", status.reason))
            continue
        rt = host.backend(kind)
        bench.run_variant(
            rows,
            "matmul",
            variant,
            tflop,
            "TFLOP/s",
            lambda rt=rt, kind=kind: bench.dsl_matmul_seconds(
                rt, kind, a_host, b_host, expected, args.launches, args.repeats, launch_autotuned
            ),
        )
    for choice in gemm.gemm.choices().values():
        print(f"  autotuned gemm: {choice.config} ({choice.source}; medians {choice.timings})")


def ratios(rate: Any) -> dict[str, Any]:
    """The autotuned rows' ratios, as the bench reports them (``rate(name, variant)``)."""
    cuda, base = rate("matmul", "DSL cuda autotuned"), rate("matmul", BASELINE)
    webgpu = rate("matmul", "DSL webgpu autotuned")
    return {
        f"DSL cuda autotuned / {BASELINE}": None if cuda is None or base is None else cuda / base,
        "target": TARGET,
        "DSL webgpu autotuned / DSL cuda autotuned": (
            None if cuda is None or webgpu is None else webgpu / cuda
        ),
    }

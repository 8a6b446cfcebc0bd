"""The f16 tensor-core GEMM of the DSL (f32 accumulate) and its bench row beside cuBLAS.

``gemm_f16`` computes ``c = a @ b`` for column-major f16 ``a`` (m x k) and ``b`` (k x n) into
f32 ``c`` (m, n multiples of 128, k of ``step``): a cube of 8 warps (256 units) computes a
128 x 128 tile of ``c``; per step it stages a 128 x step slice of ``a`` and a step x 128 slice of
``b`` in shared memory (columns padded by 8 elements against bank conflicts), then each warp
multiplies its 32 x 64 part as 2 x 4 fragments of 16 x 16, accumulating in f32 on tensor cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from tenferro_host import kernel as K

TILE = 128  # a cube computes TILE x TILE of c
DEPTH = 32  # k-slice staged per step (``step``, a multiple of 16; WebGPU's 32 KiB take 16)
UNITS = 256  # 8 warps: 4 along m (32 rows each) x 2 along n (64 columns each)
PITCH = TILE + 8  # column pitch of the staged a slice (b's is step + 8), in elements


@K.kernel
def gemm_f16(  # type: ignore[no-untyped-def]
    c: K.Array[K.f32], a: K.Array[K.f16], b: K.Array[K.f16], step: K.Const[int] = DEPTH
):
    sa = K.shared(K.f16, PITCH * step)  # a's 128 x step slice, column-major
    sb = K.shared(K.f16, (step + 8) * TILE)  # b's step x 128 slice, column-major
    fa0 = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.COL_MAJOR)
    fa1 = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.COL_MAJOR)
    fb0 = K.fragment(K.MATRIX_B, K.f16, 16, 16, 16, K.COL_MAJOR)
    fb1 = K.fragment(K.MATRIX_B, K.f16, 16, 16, 16, K.COL_MAJOR)
    fb2 = K.fragment(K.MATRIX_B, K.f16, 16, 16, 16, K.COL_MAJOR)
    fb3 = K.fragment(K.MATRIX_B, K.f16, 16, 16, 16, K.COL_MAJOR)
    c00 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c01 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c02 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c03 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c10 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c11 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c12 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    c13 = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    K.fill_fragment(c00, 0.0)
    K.fill_fragment(c01, 0.0)
    K.fill_fragment(c02, 0.0)
    K.fill_fragment(c03, 0.0)
    K.fill_fragment(c10, 0.0)
    K.fill_fragment(c11, 0.0)
    K.fill_fragment(c12, 0.0)
    K.fill_fragment(c13, 0.0)
    m = a.shape[0]
    depth = a.shape[1]
    u = K.UNIT_POS
    warp = u // 32
    wm = (warp % 4) * 32  # the warp's first row and column in the tile
    wn = (warp // 4) * 64
    row0 = K.CUBE_POS_X * TILE
    col0 = K.CUBE_POS_Y * TILE
    pb = K.u32(step + 8)
    for k0 in range(0, depth, step):
        for t in range(K.u32(step // 2)):  # 128 * step elements of each slice per cube, coalesced
            e = u + t * UNITS
            sa[e % TILE + (e // TILE) * PITCH] = a[row0 + e % TILE + (k0 + e // TILE) * m]
            sb[e % step + (e // step) * pb] = b[k0 + e % step + (col0 + e // step) * depth]
        K.sync_cube()
        for ks in range(K.u32(0), step, 16):
            K.load_fragment(fa0, sa, wm + ks * PITCH, PITCH)
            K.load_fragment(fa1, sa, wm + 16 + ks * PITCH, PITCH)
            K.load_fragment(fb0, sb, ks + wn * pb, pb)
            K.load_fragment(fb1, sb, ks + (wn + 16) * pb, pb)
            K.load_fragment(fb2, sb, ks + (wn + 32) * pb, pb)
            K.load_fragment(fb3, sb, ks + (wn + 48) * pb, pb)
            K.mma(c00, fa0, fb0, c00)
            K.mma(c01, fa0, fb1, c01)
            K.mma(c02, fa0, fb2, c02)
            K.mma(c03, fa0, fb3, c03)
            K.mma(c10, fa1, fb0, c10)
            K.mma(c11, fa1, fb1, c11)
            K.mma(c12, fa1, fb2, c12)
            K.mma(c13, fa1, fb3, c13)
        K.sync_cube()
    at = row0 + wm + (col0 + wn) * m  # c's column-major position of the warp's first element
    K.store_fragment(c, at, c00, m)
    K.store_fragment(c, at + 16 * m, c01, m)
    K.store_fragment(c, at + 32 * m, c02, m)
    K.store_fragment(c, at + 48 * m, c03, m)
    K.store_fragment(c, at + 16, c10, m)
    K.store_fragment(c, at + 16 + 16 * m, c11, m)
    K.store_fragment(c, at + 16 + 32 * m, c12, m)
    K.store_fragment(c, at + 16 + 48 * m, c13, m)


def gemm_f16_count(m: int, n: int) -> tuple[int, int]:
    """The cube count of an m x n ``c``."""
    return (m // TILE, n // TILE)


def gemm_f16_seconds(
    rt: Any,
    a_host: np.ndarray,
    b_host: np.ndarray,
    expected: np.ndarray,
    launches: int,
    median: Callable[[Callable[[], float], int], float],
    repeats: int,
    step: int = DEPTH,
) -> float:
    """Seconds per launch of ``gemm_f16`` (slices ``step`` deep) on the CUDA runtime ``rt``,
    after one checked run."""
    import tenferro_host as tf

    m, n = a_host.shape[0], b_host.shape[1]
    a, b = rt.upload(a_host), rt.upload(b_host)
    c = rt.empty("float32", (m, n))
    count = gemm_f16_count(m, n)
    with rt.session() as s, tf.cuda.exec_session(s).jit("bench.dsl_v2.gemm_f16") as js:
        js.launch(gemm_f16, count, UNITS, c, a, b, step=step)
    np.testing.assert_allclose(c.download(), expected, rtol=1e-2, atol=1e-2 * np.sqrt(m))

    def sample() -> float:
        with rt.session() as s:
            ex = tf.cuda.exec_session(s)
            start = time.perf_counter()
            with ex.jit("bench.dsl_v2.gemm_f16") as js:
                for _ in range(launches):
                    js.launch(gemm_f16, count, UNITS, c, a, b, step=step)
            ex.synchronize()
            return (time.perf_counter() - start) / launches

    return median(sample, repeats)


BASELINE = "cupy.matmul f16 (cuBLAS)"
TARGET = 0.6  # DSL cuda / BASELINE
STEPS = (DEPTH, 64)  # slice depths timed: the default, and half the barriers (36 KiB shared)


def add_rows(rows: list[dict[str, Any]], host: Any, m: int, args: Any, bench: ModuleType) -> None:
    """The ``gemm_f16`` rows of ``bench`` (``bench/dsl_v2_bench.py``, whose row helpers they
    use): ``cupy.matmul`` of f16 (cuBLAS, f32 accumulate) and the DSL on CUDA (each of
    :data:`STEPS`), checked against
    the f32 product of the same f16 inputs. WebGPU's row is not run: its fragments are loops over
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
        bench.run_variant(
            rows,
            "gemm_f16",
            BASELINE,
            tflop,
            "TFLOP/s",
            lambda: bench.cupy_seconds(lambda: cupy.matmul(ac, bc), args.launches, args.repeats),
        )
    except ImportError as exc:
        rows.append(bench.row("gemm_f16", BASELINE, None, tflop, "TFLOP/s", f"ImportError: {exc}"))
        if m <= 1024:
            expected = a_host.astype(np.float32) @ b_host.astype(np.float32)
    rows.append(
        bench.row("gemm_f16", "DSL webgpu", None, tflop, "TFLOP/s", "no tensor-core path on WebGPU")
    )
    status = host.backend_status("cuda")
    if not status.available or expected is None:
        reason = status.reason or "no reference product (no cupy, and m > 1024)"
        for step in STEPS:
            variant = "DSL cuda" if step == DEPTH else f"DSL cuda step={step}"
            rows.append(bench.row("gemm_f16", variant, None, tflop, "TFLOP/s", reason))
        return
    rt = host.backend("cuda")
    for step in STEPS:  # the first is the row the target is read from
        bench.run_variant(
            rows,
            "gemm_f16",
            "DSL cuda" if step == DEPTH else f"DSL cuda step={step}",
            tflop,
            "TFLOP/s",
            lambda step=step: gemm_f16_seconds(
                rt,
                a_host,
                b_host,
                expected,
                args.launches,
                bench.median_seconds,
                args.repeats,
                step,
            ),
        )

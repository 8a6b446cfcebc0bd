"""DSL v2 kernels against CuPy on one GPU: a shared-memory sum and a tiled f32 matmul.

Rows (each also on WebGPU, as a ratio to the CUDA JIT run of the same kernel object):

* ``sum``: the DSL sum of 2^N float32 (N = 28) — a grid-stride loop per unit, a tree in shared
  memory per cube, one ``K.atomic_add`` per cube — against ``cupy.sum``, in GB/s of input read
  (target: DSL >= 0.9x CuPy); ``load4`` rows: the same with 16-byte ``K.load4`` loads;
  ``subgroup`` rows: those loads reduced by ``K.subgroup_add`` (target: >= 0.98x CuPy; on
  WebGPU >= 0.6x the CUDA run);
* ``matmul``: the register-blocked tiled DSL matmul of two M x M float32 matrices (M = 4096;
  64 x 64 tiles in shared memory, 4 x 4 outputs per unit, ``K.fma``) against ``cupy.matmul``
  (cuBLAS SGEMM; CuPy's default compute type, no TF32 unless CUPY_TF32 is set), in TFLOP/s
  (target: DSL >= 0.4x CuPy; reported whatever it is);
* ``gemm_f16``: the DSL's f16 tensor-core GEMM (:mod:`dsl_gemm_f16`, f32 accumulate) of two
  M x M float16 matrices (``--m-f16``, 4096) against ``cupy.matmul`` of the same f16 arrays
  (cuBLAS), CUDA only (target: DSL >= 0.6x cuBLAS).

A sample is ``--launches`` launches in one JIT session followed by one ``synchronize()`` (CuPy:
the same launches, then a device synchronize); the report gives medians of ``--repeats``
samples. Every result is checked once against numpy (the sum) or CuPy (the matmul) before
timing. A missing backend or library gives a ``not run`` row with the reason. About a minute on
an H200.

    python bench/dsl_v2_bench.py                      # the H200 run
    python bench/dsl_v2_bench.py --log2-n 20 --m 256  # a small run
    python bench/dsl_v2_bench.py --json PATH          # also write the rows as JSON
                                                      # (default: $OUT/dsl_v2_bench.json)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
import dsl_gemm_f16

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.benchmarks.report import target_table, verdict

SUM_CUBE = 256
SUM_CUBES = 1056  # 8 resident cubes of 256 units on each of the H200's 132 SMs: one wave
TILE = 64  # a cube computes a TILE x TILE block of c
DEPTH = 16  # k-slice staged in shared memory per step
UNITS = 16  # cube dim UNITS x UNITS; each unit computes 4 x 4 outputs
PITCH = TILE + 1  # row pitch of the b tile: its column-wise stores hit distinct banks


@K.func
def tree_sum(s, unit, n):  # type: ignore[no-untyped-def]
    """Sum ``s[0:n]`` into ``s[0]`` (``n`` a power of two); every unit of the cube calls it."""
    half = K.u32(n // 2)
    while half > 0:
        if unit < half:
            s[unit] += s[unit + half]
        K.sync_cube()
        half = half // 2


@K.kernel
def dsl_sum(out: K.Array[K.f32], x: K.Array[K.f32]):  # type: ignore[no-untyped-def]
    """out[0] += sum(x): four independent loads in flight per unit, then a tree per cube."""
    s = K.shared(K.f32, SUM_CUBE)
    unit = K.UNIT_POS
    a0 = K.f32(0)
    a1 = K.f32(0)
    a2 = K.f32(0)
    a3 = K.f32(0)
    i = K.ABSOLUTE_POS
    stride = K.CUBE_DIM * K.CUBE_COUNT
    bulk = x.len - K.min(x.len, 3 * stride)  # i < bulk: i + 3 * stride < x.len, no overflow
    while i < bulk:
        a0 += x[i]
        a1 += x[i + stride]
        a2 += x[i + 2 * stride]
        a3 += x[i + 3 * stride]
        i += 4 * stride
    while i < x.len:
        a0 += x[i]
        i += stride
    s[unit] = (a0 + a1) + (a2 + a3)
    K.sync_cube()
    tree_sum(s, unit, SUM_CUBE)
    if unit == 0:
        K.atomic_add(out, 0, s[0])


@K.func
def vector_part(x):  # type: ignore[no-untyped-def]
    """This unit's part of ``sum(x)``: a grid-stride loop over ``K.load4`` vectors (two in
    flight per unit), the ``x.len % 4`` tail by unit 0 of cube 0."""
    a0 = K.f32(0)
    a1 = K.f32(0)
    k = K.ABSOLUTE_POS
    stride = K.CUBE_DIM * K.CUBE_COUNT
    vectors = x.len // 4
    bulk = vectors - K.min(vectors, stride)  # k < bulk: k + stride < vectors, no overflow
    while k < bulk:
        p0, p1, p2, p3 = K.load4(x, k)
        q0, q1, q2, q3 = K.load4(x, k + stride)
        a0 += (p0 + p1) + (p2 + p3)
        a1 += (q0 + q1) + (q2 + q3)
        k += 2 * stride
    while k < vectors:
        p0, p1, p2, p3 = K.load4(x, k)
        a0 += (p0 + p1) + (p2 + p3)
        k += stride
    if K.ABSOLUTE_POS == 0:
        for t in range(4 * vectors, x.len):
            a1 += x[t]
    return a0 + a1


@K.kernel
def dsl_sum4(out: K.Array[K.f32], x: K.Array[K.f32]):  # type: ignore[no-untyped-def]
    """``dsl_sum`` with 16-byte loads (:func:`vector_part`), then a tree per cube."""
    s = K.shared(K.f32, SUM_CUBE)
    unit = K.UNIT_POS
    s[unit] = vector_part(x)
    K.sync_cube()
    tree_sum(s, unit, SUM_CUBE)
    if unit == 0:
        K.atomic_add(out, 0, s[0])


@K.func
def load_tile(sa, sb, a, b, t, row0, col0, unit):  # type: ignore[no-untyped-def]
    """Stage a[row0:row0+64, t:t+16] as sa[kk*64 + r] and b[t:t+16, col0:col0+64] as
    sb[kk*PITCH + c] (zeros outside the matrices); 256 units load 4 elements of each."""
    for q in range(K.u32(4)):
        e = unit + 256 * q
        r = e % TILE
        kk = e // TILE
        va = K.f32(0)
        if row0 + r < a.shape[0] and t + kk < a.shape[1]:
            va = a[row0 + r, t + kk]
        sa[kk * TILE + r] = va
        kb = e % DEPTH  # consecutive units read consecutive rows of b (column-major)
        c = e // DEPTH
        vb = K.f32(0)
        if t + kb < b.shape[0] and col0 + c < b.shape[1]:
            vb = b[t + kb, col0 + c]
        sb[kb * PITCH + c] = vb


@K.func
def store(c, i, j, v):  # type: ignore[no-untyped-def]
    if i < c.shape[0] and j < c.shape[1]:
        c[i, j] = v


@K.kernel
def dsl_matmul(c: K.Array[K.f32], a: K.Array[K.f32], b: K.Array[K.f32]):  # type: ignore[no-untyped-def]
    """c = a @ b; unit (tx, ty) of a cube computes rows row0 + ty + 16 i, columns
    col0 + tx + 16 j of its 64 x 64 block."""
    sa = K.shared(K.f32, TILE * DEPTH)
    sb = K.shared(K.f32, DEPTH * PITCH)
    tx = K.UNIT_POS_X
    ty = K.UNIT_POS_Y
    unit = ty * UNITS + tx
    row0 = K.CUBE_POS_Y * TILE
    col0 = K.CUBE_POS_X * TILE
    c00 = K.f32(0)
    c01 = K.f32(0)
    c02 = K.f32(0)
    c03 = K.f32(0)
    c10 = K.f32(0)
    c11 = K.f32(0)
    c12 = K.f32(0)
    c13 = K.f32(0)
    c20 = K.f32(0)
    c21 = K.f32(0)
    c22 = K.f32(0)
    c23 = K.f32(0)
    c30 = K.f32(0)
    c31 = K.f32(0)
    c32 = K.f32(0)
    c33 = K.f32(0)
    for t in range(0, a.shape[1], DEPTH):
        load_tile(sa, sb, a, b, t, row0, col0, unit)
        K.sync_cube()
        for kk in range(K.u32(DEPTH)):
            a0 = sa[kk * TILE + ty]
            a1 = sa[kk * TILE + ty + 16]
            a2 = sa[kk * TILE + ty + 32]
            a3 = sa[kk * TILE + ty + 48]
            b0 = sb[kk * PITCH + tx]
            b1 = sb[kk * PITCH + tx + 16]
            b2 = sb[kk * PITCH + tx + 32]
            b3 = sb[kk * PITCH + tx + 48]
            c00 = K.fma(a0, b0, c00)
            c01 = K.fma(a0, b1, c01)
            c02 = K.fma(a0, b2, c02)
            c03 = K.fma(a0, b3, c03)
            c10 = K.fma(a1, b0, c10)
            c11 = K.fma(a1, b1, c11)
            c12 = K.fma(a1, b2, c12)
            c13 = K.fma(a1, b3, c13)
            c20 = K.fma(a2, b0, c20)
            c21 = K.fma(a2, b1, c21)
            c22 = K.fma(a2, b2, c22)
            c23 = K.fma(a2, b3, c23)
            c30 = K.fma(a3, b0, c30)
            c31 = K.fma(a3, b1, c31)
            c32 = K.fma(a3, b2, c32)
            c33 = K.fma(a3, b3, c33)
        K.sync_cube()
    r = row0 + ty
    q = col0 + tx
    store(c, r, q, c00)
    store(c, r, q + 16, c01)
    store(c, r, q + 32, c02)
    store(c, r, q + 48, c03)
    store(c, r + 16, q, c10)
    store(c, r + 16, q + 16, c11)
    store(c, r + 16, q + 32, c12)
    store(c, r + 16, q + 48, c13)
    store(c, r + 32, q, c20)
    store(c, r + 32, q + 16, c21)
    store(c, r + 32, q + 32, c22)
    store(c, r + 32, q + 48, c23)
    store(c, r + 48, q, c30)
    store(c, r + 48, q + 16, c31)
    store(c, r + 48, q + 32, c32)
    store(c, r + 48, q + 48, c33)


def matmul_count(m: int) -> tuple[int, int]:
    return (-(-m // TILE), -(-m // TILE))


@K.kernel
def dsl_sum_subgroup(out: K.Array[K.f32], x: K.Array[K.f32]):  # type: ignore[no-untyped-def]
    """:func:`vector_part`'s loads, reduced by subgroups instead of a tree: a subgroup sum per
    subgroup, the subgroups' sums through shared memory (subgroups of 4 units or more), one more
    subgroup sum and one atomic per cube; two barriers instead of nine."""
    partial = K.shared(K.f32, SUM_CUBE // 4)
    s = K.subgroup_add(vector_part(x))
    lane = K.SUBGROUP_UNIT_POS
    if lane == 0:
        partial[K.UNIT_POS // K.SUBGROUP_SIZE] = s
    K.sync_cube()
    v = K.f32(0)
    j = lane
    while j < K.CUBE_DIM // K.SUBGROUP_SIZE:
        v += partial[j]
        j += K.SUBGROUP_SIZE
    total = K.subgroup_add(v)
    if K.UNIT_POS == 0:
        K.atomic_add(out, 0, total)


def exec_session(kind: str, session: Any) -> Any:
    return {"webgpu": tf.webgpu.exec_session, "cuda": tf.cuda.exec_session}[kind](session)


def median_seconds(sample: Callable[[], float], repeats: int) -> float:
    sample()  # compile, allocate, warm up
    return statistics.median(sample() for _ in range(repeats))


def dsl_sum_seconds(
    rt: Any,
    kind: str,
    x_host: np.ndarray,
    launches: int,
    repeats: int,
    cubes: int = SUM_CUBES,
    kernel: K.Kernel = dsl_sum,
) -> float:
    x = rt.upload(x_host)
    out = rt.upload(np.zeros(1, np.float32))
    with rt.session() as s, exec_session(kind, s).jit("bench.dsl_v2.sum") as js:
        js.launch(kernel, cubes, SUM_CUBE, out, x)
    got = float(out.download()[0])
    want = float(x_host.sum(dtype=np.float64))
    if not abs(got - want) <= 1e-3 * float(np.abs(x_host).sum(dtype=np.float64)):
        raise AssertionError(f"DSL sum on {kind} is {got}, numpy says {want}")

    def sample() -> float:
        with rt.session() as s:
            ex = exec_session(kind, s)
            start = time.perf_counter()
            with ex.jit("bench.dsl_v2.sum") as js:
                for _ in range(launches):
                    js.launch(kernel, cubes, SUM_CUBE, out, x)
            ex.synchronize()
            return (time.perf_counter() - start) / launches

    return median_seconds(sample, repeats)


def launch_dsl_matmul(js: Any, c: Any, a: Any, b: Any) -> None:
    js.launch(dsl_matmul, matmul_count(c.shape[0]), (UNITS, UNITS), c, a, b)


def dsl_matmul_seconds(
    rt: Any,
    kind: str,
    a_host: np.ndarray,
    b_host: np.ndarray,
    expected: np.ndarray | None,
    launches: int,
    repeats: int,
    launch: Callable[[Any, Any, Any, Any], None] = launch_dsl_matmul,
) -> float:
    """``launch(js, c, a, b)``'s seconds; its first launch (an autotuned kernel's tuning) is
    checked and not timed."""
    m = a_host.shape[0]
    a, b = rt.upload(a_host), rt.upload(b_host)
    c = rt.empty("float32", (m, m))
    with rt.session() as s, exec_session(kind, s).jit("bench.dsl_v2.matmul") as js:
        launch(js, c, a, b)
    if expected is not None:
        np.testing.assert_allclose(c.download(), expected, rtol=1e-3, atol=1e-3 * np.sqrt(m))

    def sample() -> float:
        with rt.session() as s:
            ex = exec_session(kind, s)
            start = time.perf_counter()
            with ex.jit("bench.dsl_v2.matmul") as js:
                for _ in range(launches):
                    launch(js, c, a, b)
            ex.synchronize()
            return (time.perf_counter() - start) / launches

    return median_seconds(sample, repeats)


def cupy_seconds(fn: Callable[[], Any], launches: int, repeats: int) -> float:
    import cupy

    def sample() -> float:
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        cupy.cuda.Device().synchronize()
        return (time.perf_counter() - start) / launches

    return median_seconds(sample, repeats)


def row(
    name: str,
    variant: str,
    seconds: float | None,
    work: float,
    unit: str,
    reason: str | None = None,
) -> dict[str, Any]:
    rate = None if seconds is None else work / seconds
    status = (
        "ok" if reason is None else reason if reason.startswith("WRONG") else (f"not run: {reason}")
    )
    return {
        "benchmark": name,
        "variant": variant,
        "status": status,
        "ms": None if seconds is None else seconds * 1e3,
        unit: rate,
    }


def run_variant(
    rows: list[dict[str, Any]],
    name: str,
    variant: str,
    work: float,
    unit: str,
    measure: Callable[[], float],
) -> None:
    try:
        rows.append(row(name, variant, measure(), work, unit))
    except AssertionError as exc:  # a wrong result: reported, never timed
        rows.append(row(name, variant, None, work, unit, f"WRONG RESULT: {exc}"))
    except Exception as exc:  # a missing library, a backend or adapter limit: the other rows run
        rows.append(row(name, variant, None, work, unit, f"{type(exc).__name__}: {exc}"))


def main(argv: list[str] | None = None) -> int:  # noqa: C901 - one bench row after another
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2-n", type=int, default=28, help="sum of 2^N float32 (28)")
    parser.add_argument("--m", type=int, default=4096, help="matmul of M x M float32 (4096)")
    parser.add_argument("--m-f16", type=int, default=4096, help="f16 GEMM of M x M (4096)")
    parser.add_argument("--sum-cubes", type=int, default=SUM_CUBES, help="cubes of the sum")
    parser.add_argument("--launches", type=int, default=10, help="launches per sample (10)")
    parser.add_argument("--repeats", type=int, default=5, help="samples per variant (5)")
    parser.add_argument("--json", help="write the rows here (default: $OUT/dsl_v2_bench.json)")
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
        run_variant(
            rows,
            "sum",
            "cupy.sum",
            gb,
            "GB/s",
            lambda: cupy_seconds(lambda: cupy.sum(xc), args.launches, args.repeats),
        )
        ac, bc = cupy.asarray(a_host), cupy.asarray(b_host)
        expected = cupy.asnumpy(cupy.matmul(ac, bc))
        run_variant(
            rows,
            "matmul",
            "cupy.matmul (cuBLAS SGEMM)",
            tflop,
            "TFLOP/s",
            lambda: cupy_seconds(lambda: cupy.matmul(ac, bc), args.launches, args.repeats),
        )
    except ImportError as exc:
        for name, variant, work, unit in (
            ("sum", "cupy.sum", gb, "GB/s"),
            ("matmul", "cupy.matmul (cuBLAS SGEMM)", tflop, "TFLOP/s"),
        ):
            rows.append(row(name, variant, None, work, unit, f"ImportError: {exc}"))
    if expected is None and m <= 1024:
        expected = a_host.astype(np.float64) @ b_host.astype(np.float64)

    sums = (("", dsl_sum), (" load4", dsl_sum4), (" subgroup", dsl_sum_subgroup))  # the rows
    for kind, status in kinds.items():
        if not status.available:
            reason = status.reason or "unavailable"
            for suffix, _ in sums:
                rows.append(row("sum", f"DSL {kind}{suffix}", None, gb, "GB/s", reason))
            rows.append(row("matmul", f"DSL {kind}", None, tflop, "TFLOP/s", reason))
            continue
        rt = host.backend(kind)
        for suffix, kernel in sums:
            run_variant(
                rows,
                "sum",
                f"DSL {kind}{suffix}",
                gb,
                "GB/s",
                lambda rt=rt, kind=kind, kernel=kernel: dsl_sum_seconds(
                    rt, kind, x_host, args.launches, args.repeats, args.sum_cubes, kernel
                ),
            )
        run_variant(
            rows,
            "matmul",
            f"DSL {kind}",
            tflop,
            "TFLOP/s",
            lambda rt=rt, kind=kind: dsl_matmul_seconds(
                rt, kind, a_host, b_host, expected, args.launches, args.repeats
            ),
        )

    dsl_gemm_f16.add_rows(rows, host, args.m_f16, args, sys.modules[__name__])
    import dsl_gemm_f32  # the autotuned f32 GEMM rows (kept beside: this file's size)

    dsl_gemm_f32.add_rows(rows, host, a_host, b_host, expected, args, sys.modules[__name__])

    def rate(name: str, variant: str) -> float | None:
        for r in rows:
            if r["benchmark"] == name and r["variant"] == variant and r["status"] == "ok":
                return r["GB/s" if name == "sum" else "TFLOP/s"]
        return None

    ratios: dict[str, dict[str, Any]] = {}
    for name, baseline, target in (
        ("sum", "cupy.sum", 0.9),
        ("matmul", "cupy.matmul (cuBLAS SGEMM)", 0.4),
        ("gemm_f16", dsl_gemm_f16.BASELINE, dsl_gemm_f16.TARGET),
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
    ratios["matmul autotuned"] = dsl_gemm_f32.ratios(rate)
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
        print(f"  {r['benchmark']:7s} {r['variant']:28s} {figure or r['status']}")
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
        os.path.join(os.environ["OUT"], "dsl_v2_bench.json") if os.environ.get("OUT") else None
    )
    if path:
        with open(path, "w") as fh:
            json.dump(report, fh, indent=2)
    wrong = any(r["status"].startswith("WRONG") for r in rows)
    return 1 if wrong or not any(r["status"] == "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

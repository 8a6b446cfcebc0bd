"""Seeded random matrix-fragment kernels for the differential test (``test_differential.py``).

Each kernel multiplies, per warp, an M x K f16 tile of ``a`` by a K x N f16 tile of ``b``
(K = 16 or 32: one or two ``K.mma`` steps) onto an f32 accumulator that is filled with a
constant or loaded from ``c``, and stores it into ``d``. Drawn per kernel: the layout of each
fragment, the leading dimensions and starts (aligned as tensor cores need), whether ``a`` and
``b`` are staged in shared memory, and whether ``mma`` writes a fragment of its own; from a
stream of their own (so the draws above stay those of earlier seeds' kernels): the shape
``(M, N, 16)``, one of every target's (m16n8k16 among them), and whether ``a`` and ``b`` are
arrays of fragments, one per step, indexed in a ``K.static_range`` loop. Inputs are
small integers, so every partial sum is exact in f32 and all targets must agree bit for bit
(and with :func:`expected`, numpy's product). Two cubes of two warps each.

:func:`generate` gives the module source (kernel source must live in a file); :func:`inputs`
the arrays of one kernel. Same seed, same kernels and inputs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

CUBES, CUBE = 2, 64
WARPS_PER_CUBE = CUBE // 32
WARPS = CUBES * WARPS_PER_CUBE
SHAPES = ((16, 16), (32, 8), (8, 32), (16, 8))
"""``(M, N)`` of the kernels' fragments (K = 16): the shapes of ``ir.SHAPES``."""
SENTINEL = -7777.0
"""What ``d`` holds before the launch: elements no store writes must keep it on every target."""


@dataclass(frozen=True)
class Operand:
    """Where one warp's tile of an operand lies: its layout, leading dimension, start within
    the warp's region and the region's length (a multiple of 32 bytes)."""

    layout: str  # "row" | "col"
    ld: int
    start: int
    region: int

    def position(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Offsets within a region of element ``(i, j)`` of the tile."""
        return self.start + (i * self.ld + j if self.layout == "row" else i + j * self.ld)


@dataclass(frozen=True)
class FragmentKernel:
    """One generated kernel and what its launch computes."""

    name: str
    m: int
    n: int
    arrays: bool  # a and b are arrays of fragments, one per step
    steps: int  # K = 16 * steps
    a: Operand
    b: Operand
    acc: Operand  # of c (when loaded) and d
    fill: int | None  # the accumulator's constant, or None: loaded from c
    shared: bool
    separate: bool  # mma(out, fa, fb, acc) rather than mma(acc, fa, fb, acc)


def _operand(rng: random.Random, rows: int, cols: int, elem_align: int, ld_align: int) -> Operand:
    layout = rng.choice(["row", "col"])
    inner = cols if layout == "row" else rows
    ld = inner + ld_align * rng.randint(0, 2)
    start = elem_align * rng.randint(0, 2)
    extent = start + (rows - 1) * ld + cols if layout == "row" else start + (cols - 1) * ld + rows
    region = -(-extent // elem_align) * elem_align
    return Operand(layout, ld, start, region)


def _draw(name: str, rng: random.Random, shapes: random.Random) -> FragmentKernel:
    m, n = shapes.choice(SHAPES)
    arrays = shapes.random() < 0.5
    align = 8 if (m, n) == (16, 8) else 16
    steps = rng.randint(1, 2)
    k = 16 * steps
    return FragmentKernel(
        name,
        m,
        n,
        arrays,
        steps,
        _operand(rng, m, k, align, 8),  # f16: starts at 32 bytes (16: m16n8k16), ld at 16
        _operand(rng, k, n, align, 8),
        _operand(rng, m, n, 8, 4),  # f32
        rng.randint(-8, 8) if rng.random() < 0.5 else None,
        rng.random() < 0.5,
        rng.random() < 0.5,
    )


def _source(fk: FragmentKernel) -> str:
    a, b, acc = fk.a, fk.b, fk.acc
    lay = {"row": "K.ROW_MAJOR", "col": "K.COL_MAJOR"}
    lines = [
        "@K.kernel",
        f"def {fk.name}(d: K.Array[K.f32], a: K.Array[K.f16], b: K.Array[K.f16], "
        "c: K.Array[K.f32]):",
        "    u = K.UNIT_POS",
        "    w = u // 32 + K.CUBE_POS * (K.CUBE_DIM // 32)",
    ]
    src_a, src_b, at_a, at_b = "a", "b", f"w * {a.region}", f"w * {b.region}"
    if fk.shared:
        for name, op in (("a", a), ("b", b)):
            n = WARPS_PER_CUBE * op.region
            lines += [
                f"    s{name} = K.shared(K.f16, {n})",
                f"    for t in range(K.u32({-(-n // CUBE)})):",
                f"        e = u + {CUBE} * t",
                f"        if e < {n}:",
                f"            s{name}[e] = {name}[K.CUBE_POS * {n} + e]",
            ]
        lines.append("    K.sync_cube()")
        src_a, src_b = "sa", "sb"
        at_a, at_b = f"(u // 32) * {a.region}", f"(u // 32) * {b.region}"
    shape = f"{fk.m}, {fk.n}, 16"
    count = f", {fk.steps}" if fk.arrays else ""
    lines += [
        f"    fa = K.fragment(K.MATRIX_A, K.f16, {shape}, {lay[a.layout]}{count})",
        f"    fb = K.fragment(K.MATRIX_B, K.f16, {shape}, {lay[b.layout]}{count})",
        f"    acc = K.fragment(K.ACCUMULATOR, K.f32, {shape}, {lay[acc.layout]})",
    ]
    at_c = f"w * {acc.region} + {acc.start}"
    if fk.fill is None:
        lines.append(f"    K.load_fragment(acc, c, {at_c}, {acc.ld})")
    else:
        lines.append(f"    K.fill_fragment(acc, {float(fk.fill)!r})")
    out = "acc"
    if fk.separate:
        lines.append(f"    out = K.fragment(K.ACCUMULATOR, K.f32, {shape}, {lay[acc.layout]})")
        out = "out"
    if fk.arrays:  # step s: columns 16 s.. of a's tile, rows 16 s.. of b's, into fa[s], fb[s]
        da = "16 * s" if a.layout == "row" else f"16 * s * {a.ld}"
        db = f"16 * s * {b.ld}" if b.layout == "row" else "16 * s"
        lines += [
            f"    for s in K.static_range({fk.steps}):",
            f"        K.load_fragment(fa[s], {src_a}, {at_a} + {a.start} + {da}, {a.ld})",
            f"        K.load_fragment(fb[s], {src_b}, {at_b} + {b.start} + {db}, {b.ld})",
        ]
    for s in range(fk.steps):
        if fk.arrays:
            fa, fb = f"fa[{s}]", f"fb[{s}]"
        else:  # step s loads into the one fragment of each
            fa, fb = "fa", "fb"
            da_s = 16 * s if a.layout == "row" else 16 * s * a.ld
            db_s = 16 * s * b.ld if b.layout == "row" else 16 * s
            lines += [
                f"    K.load_fragment(fa, {src_a}, {at_a} + {a.start + da_s}, {a.ld})",
                f"    K.load_fragment(fb, {src_b}, {at_b} + {b.start + db_s}, {b.ld})",
            ]
        into, onto = (out, "acc") if s == 0 else (out, out)
        lines.append(f"    K.mma({into}, {fa}, {fb}, {onto})")
    lines.append(f"    K.store_fragment(d, {at_c}, {out}, {acc.ld})")
    return "\n".join(lines) + "\n"


def generate(seed: int, count: int) -> tuple[str, list[FragmentKernel]]:
    """The source of a module with ``count`` kernels ``frag0 ..``, and what each one is."""
    rng, shapes = random.Random(seed), random.Random(f"{seed} shapes")
    kernels = [_draw(f"frag{n}", rng, shapes) for n in range(count)]
    parts = ["# ruff: noqa\n# generated by tests/support/fragment_fuzz.py\n"]
    parts.append("from tenferro_host import kernel as K\n")
    parts += [_source(fk) for fk in kernels]
    return "\n\n".join(parts), kernels


def inputs(seed: int, fk: FragmentKernel) -> dict[str, np.ndarray]:
    """``d`` (the sentinel), and small-integer ``a``, ``b``, ``c``: the same for every target."""
    rng = np.random.default_rng(seed)
    return {
        "d": np.full(WARPS * fk.acc.region, SENTINEL, np.float32),
        "a": rng.integers(-8, 9, WARPS * fk.a.region).astype(np.float16),
        "b": rng.integers(-8, 9, WARPS * fk.b.region).astype(np.float16),
        "c": rng.integers(-16, 17, WARPS * fk.acc.region).astype(np.float32),
    }


def expected(fk: FragmentKernel, args: dict[str, np.ndarray]) -> np.ndarray:
    """``d`` after the launch, by numpy in exact (float64) arithmetic."""
    k = 16 * fk.steps
    d = args["d"].copy()
    i, j = np.meshgrid(np.arange(fk.m), np.arange(k), indexing="ij")
    p, q = np.meshgrid(np.arange(k), np.arange(fk.n), indexing="ij")
    r, s = np.meshgrid(np.arange(fk.m), np.arange(fk.n), indexing="ij")
    for w in range(WARPS):
        a = args["a"][w * fk.a.region + fk.a.position(i, j)].astype(np.float64)
        b = args["b"][w * fk.b.region + fk.b.position(p, q)].astype(np.float64)
        at = w * fk.acc.region + fk.acc.position(r, s)
        c = np.full((fk.m, fk.n), float(fk.fill)) if fk.fill is not None else args["c"][at]
        d[at] = (c + a @ b).astype(np.float32)
    return d


__all__ = ["CUBE", "CUBES", "FragmentKernel", "expected", "generate", "inputs"]

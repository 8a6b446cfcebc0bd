# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""The autotuned f32 GEMM: one tiled kernel, configs over its tile sizes, ``c = a @ b``.

A cube of ``(BN/4) x (BM/4)`` units computes a ``BM x BN`` block of ``c``, each unit a 4 x 4
block of it (rows ``row0 + 4 ty + i``, columns ``col0 + 4 tx + j``). For each ``BK``-deep
slice of the inner dimension the cube stages ``a[row0:row0+BM, t:t+BK]`` and
``b[t:t+BK, col0:col0+BN]`` in shared memory (zeros outside the matrices) and each unit reads
its four ``a`` and four ``b`` values with one ``K.load4`` each. ``GEMM_CONFIGS[0]`` (a 64 x 64
block of 256 units) runs on every target; the others need cubes of up to 1024 units (on WebGPU
adapters that allow 256 they are skipped while tuning, with a warning).

>>> gemm_count(100, 70, 9, GEMM_CONFIGS[0])
(2, 2)
"""

from __future__ import annotations

from .. import kernel as K
from .tuned_gemm import ConfiguredGemm


@K.func
def stage(s, x, row0, col0, rows, cols, unit, units, row_step, col_step):
    """Copy ``x[row0:row0+rows, col0:col0+cols]`` (zeros outside ``x``) into shared ``s`` at
    ``r * row_step + c * col_step``, ``units`` units together; consecutive units read
    consecutive rows (the matrices are column-major)."""
    for q in range(K.u32((rows * cols + units - 1) // units)):
        e = unit + units * q
        if e < rows * cols:
            r = e % rows
            c = e // rows
            v = K.f32(0)
            if row0 + r < x.shape[0] and col0 + c < x.shape[1]:
                v = x[row0 + r, col0 + c]
            s[r * row_step + c * col_step] = v


@K.func
def load_tiles(sa, sb, a, b, t, row0, col0, unit, bm, bn, bk):
    """Stage the ``a`` and ``b`` slices of step ``t``: ``a``'s column-major, ``b``'s row-major
    with a pitch of bn + 4 (16-byte rows, fewer bank conflicts)."""
    units = K.u32((bm // 4) * (bn // 4))
    stage(sa, a, row0, t, bm, bk, unit, units, 1, bm)
    stage(sb, b, t, col0, bk, bn, unit, units, bn + 4, 1)


@K.func
def store_row(c, i, j, v0, v1, v2, v3):
    """c[i, j:j+4] = v0..v3, within the matrix."""
    if i < c.shape[0]:
        if j < c.shape[1]:
            c[i, j] = v0
        if j + 1 < c.shape[1]:
            c[i, j + 1] = v1
        if j + 2 < c.shape[1]:
            c[i, j + 2] = v2
        if j + 3 < c.shape[1]:
            c[i, j + 3] = v3


@K.kernel
def tiled_gemm(
    c: K.Array[K.f32],
    a: K.Array[K.f32],
    b: K.Array[K.f32],
    BM: K.Const[int] = 64,  # noqa: N803 - tile sizes read as constants
    BN: K.Const[int] = 64,  # noqa: N803
    BK: K.Const[int] = 16,  # noqa: N803
):
    """The product a @ b into c, one BM x BN block per cube (see the module docstring)."""
    sa = K.shared(K.f32, BM * BK)
    sb = K.shared(K.f32, BK * (BN + 4))
    tx = K.UNIT_POS_X
    ty = K.UNIT_POS_Y
    unit = ty * K.u32(BN // 4) + tx
    row0 = K.CUBE_POS_Y * BM
    col0 = K.CUBE_POS_X * BN
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
    for t in range(0, a.shape[1], BK):
        load_tiles(sa, sb, a, b, t, row0, col0, unit, BM, BN, BK)
        K.sync_cube()
        for kk in range(K.u32(BK)):
            a0, a1, a2, a3 = K.load4(sa, kk * K.u32(BM // 4) + ty)
            b0, b1, b2, b3 = K.load4(sb, kk * K.u32((BN + 4) // 4) + tx)
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
    r = row0 + 4 * ty
    q = col0 + 4 * tx
    store_row(c, r, q, c00, c01, c02, c03)
    store_row(c, r + 1, q, c10, c11, c12, c13)
    store_row(c, r + 2, q, c20, c21, c22, c23)
    store_row(c, r + 3, q, c30, c31, c32, c33)


def _config(bm: int, bn: int, bk: int) -> K.Config:
    return K.Config({"BM": bm, "BN": bn, "BK": bk}, dim=(bn // 4, bm // 4))


#: The tile sizes tried, the portable one first (what a frozen or untimed launch runs).
GEMM_CONFIGS = (
    _config(64, 64, 16),
    _config(64, 64, 8),
    _config(32, 64, 16),
    _config(128, 64, 8),
    _config(64, 128, 8),
    _config(128, 128, 8),
)


def gemm_count(m: int, n: int, k: int, config: K.Config) -> tuple[int, int]:
    """The cube count covering an ``m x n`` output with ``config``'s blocks (any ``k``)."""
    return (-(-n // config["BN"]), -(-m // config["BM"]))


#: The GEMM with its configs: ``TILED_GEMM.launch(js, c, a, b, config)``, and autotuned
#: (``TILED_GEMM.tuned``, or ``TILED_GEMM.autotuned(frozen=..., timer=...)``).
TILED_GEMM = ConfiguredGemm(tiled_gemm, GEMM_CONFIGS, gemm_count)

__all__ = ["GEMM_CONFIGS", "TILED_GEMM", "gemm_count", "tiled_gemm"]

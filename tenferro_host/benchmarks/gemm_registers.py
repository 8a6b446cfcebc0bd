# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""The register-tiled f32 GEMM: ``c = a @ b`` for column-major f32 matrices, each unit an
8 x 8 block of ``c`` in a register array (``K.registers``).

A cube of ``(BM / 8) x (BN / 8)`` units computes a ``BM x BN`` block of ``c``. Per ``BK``-deep
slice of the inner dimension it stages ``a[row0:row0+BM, t:t+BK]`` and ``b[t:t+BK,
col0:col0+BN]`` in shared memory, both k-major (``sa[kk][row]``, ``sb[kk][col]``), in two
buffers: a step starts slice ``t``'s copies of ``a`` (``K.copy_async``: the columns of ``a``
are ``sa``'s rows) and its loads of ``b`` into registers, multiplies slice ``t - BK`` from the
other buffer meanwhile, then stores ``b``'s slice transposed and waits for the copies (one
barrier per step). A unit reads
its 8 rows (two runs of 4, half a block apart) and 8 columns (likewise) per ``kk`` with four
``K.load4`` (consecutive units read consecutive 16 bytes) and makes 64 ``K.fma`` into ``acc``;
every register index is a constant of a ``K.static_range`` loop, so the tile stays in
registers on CUDA.

Blocks inside the matrices with ``m`` a multiple of 4 and ``k`` of ``BK`` take 16-byte loads
and stores; the others go element by element with bounds checks (zeros outside).

>>> register_gemm_count(300, 100, 7, REGISTER_CONFIGS[0])
(1, 3)
"""

from __future__ import annotations

from .. import kernel as K
from .tuned_gemm import ConfiguredGemm

TILE = 8  # rows and columns of c per unit


@K.kernel(max_units=256, min_resident=2)  # two cubes per SM: at most 128 registers per unit
def register_gemm(  # noqa: C901 - one kernel: a slice's loads, multiply and stores per step
    c: K.Array[K.f32],
    a: K.Array[K.f32],
    b: K.Array[K.f32],
    BM: K.Const[int] = 128,  # noqa: N803 - tile sizes read as constants
    BN: K.Const[int] = 128,  # noqa: N803
    BK: K.Const[int] = 8,  # noqa: N803 - the k-slice staged per step, 8 or 16
):
    """The product a @ b into c, one BM x BN block per cube (see the module docstring)."""
    sa = K.shared(K.f32, 2 * BK * BM)  # [buffer][kk][row]
    sb = K.shared(K.f32, 2 * BK * BN)  # [buffer][kk][col]
    acc = K.registers(K.f32, (TILE, TILE))
    ra = K.registers(K.f32, TILE)
    rb = K.registers(K.f32, TILE)
    pb = K.registers(K.f32, 64 * BK // BM)  # this unit's share of a slice of b, in flight
    unit = K.UNIT_POS
    units = K.u32(BM * BN // 64)
    tx = unit % K.u32(BN // TILE)
    ty = unit // K.u32(BN // TILE)
    m = c.shape[0]
    n = c.shape[1]
    depth = a.shape[1]
    row0 = K.CUBE_POS_Y * BM
    col0 = K.CUBE_POS_X * BN
    full = row0 + BM <= m and col0 + BN <= n and m % 4 == 0 and depth % BK == 0
    half = K.u32(0)  # the buffer the next slice is stored into
    for t in range(0, depth + BK, BK):
        if t < depth:  # slice t: a's float4 e (rows 4e.. of its column) straight into shared
            for q in K.static_range(16 * BK // BN):
                e = unit + q * units
                r = row0 + (e % K.u32(BM // 4)) * 4
                k = t + e // K.u32(BM // 4)
                at = half * K.u32(BK * BM) + 4 * e
                if full:
                    K.copy_async(sa, at, a, k * m + r, 4)
                else:
                    for i in K.static_range(4):
                        v = K.f32(0)
                        if r + i < m and k < depth:
                            v = a[r + i, k]
                        sa[at + i] = v
            K.commit_copies()
            for q in K.static_range(16 * BK // BM):  # b's float4 e: rows 4(e % f).. of column e/f
                e = unit + q * units
                k = t + (e % K.u32(BK // 4)) * 4
                jc = col0 + e // K.u32(BK // 4)
                if full:
                    w0, w1, w2, w3 = K.load4(b, (jc * depth + k) // 4)
                    pb[4 * q] = w0
                    pb[4 * q + 1] = w1
                    pb[4 * q + 2] = w2
                    pb[4 * q + 3] = w3
                else:
                    for i in K.static_range(4):
                        w = K.f32(0)
                        if k + i < depth and jc < n:
                            w = b[k + i, jc]
                        pb[4 * q + i] = w
        if t > 0:  # multiply slice t - BK, in the other buffer
            other = (1 - half) * K.u32(BK)
            for kk in K.static_range(BK):
                fa = (other + kk) * K.u32(BM // 4) + ty
                fb = (other + kk) * K.u32(BN // 4) + tx
                a0, a1, a2, a3 = K.load4(sa, fa)
                a4, a5, a6, a7 = K.load4(sa, fa + BM // 8)
                b0, b1, b2, b3 = K.load4(sb, fb)
                b4, b5, b6, b7 = K.load4(sb, fb + BN // 8)
                ra[0] = a0
                ra[1] = a1
                ra[2] = a2
                ra[3] = a3
                ra[4] = a4
                ra[5] = a5
                ra[6] = a6
                ra[7] = a7
                rb[0] = b0
                rb[1] = b1
                rb[2] = b2
                rb[3] = b3
                rb[4] = b4
                rb[5] = b5
                rb[6] = b6
                rb[7] = b7
                for i in K.static_range(TILE):
                    for j in K.static_range(TILE):
                        acc[i, j] = K.fma(ra[i], rb[j], acc[i, j])
        if t < depth:  # b's slice t into this step's buffer, and a's copies waited for
            for q in K.static_range(16 * BK // BM):
                e = unit + q * units
                at = (half * K.u32(BK) + (e % K.u32(BK // 4)) * 4) * K.u32(BN) + e // K.u32(BK // 4)
                for i in K.static_range(4):
                    sb[at + i * BN] = pb[4 * q + i]
            K.wait_copies(0)
        K.sync_cube()
        half = 1 - half
    for j in K.static_range(TILE):  # unit column j: tx*4 + j, the second four half a block on
        col = col0 + (j // 4) * (BN // 2) + tx * 4 + j % 4
        for h in K.static_range(2):
            row = row0 + h * (BM // 2) + ty * 4
            if full:
                K.store4(
                    c, (col * m + row) // 4, acc[4 * h, j], acc[4 * h + 1, j],
                    acc[4 * h + 2, j], acc[4 * h + 3, j],
                )  # fmt: skip
            else:
                for i in K.static_range(4):
                    if row + i < m and col < n:
                        c[row + i, col] = acc[4 * h + i, j]


def _config(bm: int, bn: int, bk: int = 8) -> K.Config:
    return K.Config({"BM": bm, "BN": bn, "BK": bk}, dim=bm * bn // (TILE * TILE))


#: The block sizes tried, 128 x 128 x 8 first (the untuned launch's).
REGISTER_CONFIGS = (
    _config(128, 128),
    _config(128, 128, 16),
    _config(128, 64),
    _config(64, 128),
    _config(64, 64),
)


def register_gemm_count(m: int, n: int, k: int, config: K.Config) -> tuple[int, int]:
    """The cube count covering an ``m x n`` output with ``config``'s blocks (x: columns; any
    ``k``)."""
    return (-(-n // config["BN"]), -(-m // config["BM"]))


#: The GEMM with its configs: ``REGISTER_GEMM.launch(js, c, a, b, config)``,
#: ``REGISTER_GEMM.tuned``.
REGISTER_GEMM = ConfiguredGemm(register_gemm, REGISTER_CONFIGS, register_gemm_count)

__all__ = ["REGISTER_CONFIGS", "REGISTER_GEMM", "register_gemm", "register_gemm_count"]

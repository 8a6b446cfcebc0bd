# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""The f16 tensor-core GEMM of the DSL (f32 accumulate), which ``bench/dsl_vs_cupy.py`` times
beside cuBLAS.

``gemm_f16`` computes ``c = a @ b`` for column-major f16 ``a`` (m x k) and ``b`` (k x n) into
f32 ``c`` (m, n multiples of 128, k of ``step``): a cube of 8 warps (256 units) computes a
128 x 128 tile of ``c``; per step it stages a 128 x step slice of ``a`` and a step x 128 slice of
``b`` in shared memory (columns padded by 8 elements against bank conflicts), then each warp
multiplies its 32 x 64 part as 2 x 4 fragments of 16 x 16, accumulating in f32 on tensor cores.
"""

from __future__ import annotations

from .. import kernel as K

TILE = 128  # a cube computes TILE x TILE of c
DEPTH = 32  # k-slice staged per step (``step``, a multiple of 16; WebGPU's 32 KiB take 16)
UNITS = 256  # 8 warps: 4 along m (32 rows each) x 2 along n (64 columns each)
PITCH = TILE + 8  # column pitch of the staged a slice (b's is step + 8), in elements


@K.kernel
def gemm_f16(c: K.Array[K.f32], a: K.Array[K.f16], b: K.Array[K.f16], step: K.Const[int] = DEPTH):
    """``c = a @ b`` on tensor cores, one 128 x 128 tile of ``c`` per cube (see the module)."""
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


#: Slice depths the bench times: the default, and half the barriers (36 KiB shared).
STEPS = (DEPTH, 64)

__all__ = ["DEPTH", "STEPS", "TILE", "UNITS", "gemm_f16", "gemm_f16_count"]

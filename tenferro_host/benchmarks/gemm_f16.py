# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""The f16 tensor-core GEMM of the DSL (f32 accumulate), which ``bench/dsl_vs_cupy.py`` times
beside cuBLAS.

``gemm_f16`` computes ``c = a @ b`` for column-major f16 ``a`` (m x k) and ``b`` (k x n) into
f32 ``c`` (m, n multiples of 128, k of ``step``): a cube of 8 warps (256 units) computes a
128 x 128 tile of ``c``; per step it stages a 128 x step slice of ``a`` and a step x 128 slice of
``b`` in shared memory (columns padded by 8 elements against bank conflicts) with 16-byte
asynchronous copies, ``stages`` slices deep (two: the next slice loads while this one is
multiplied; one fits WebGPU's 32 KiB), then each warp multiplies its 32 x 64 part as 2 x 4
fragments of 16 x 16, accumulating in f32 on tensor cores.
"""

from __future__ import annotations

from .. import kernel as K

TILE = 128  # a cube computes TILE x TILE of c
DEPTH = 32  # k-slice staged per step (``step``: 16 or 32, two stages of it in shared memory)
UNITS = 256  # 8 warps: 4 along m (32 rows each) x 2 along n (64 columns each)
PITCH = TILE + 8  # column pitch of the staged a slice (b's is step + 8), in elements


@K.kernel
def gemm_f16(
    c: K.Array[K.f32],
    a: K.Array[K.f16],
    b: K.Array[K.f16],
    step: K.Const[int] = DEPTH,
    stages: K.Const[int] = 2,
):
    """``c = a @ b`` on tensor cores, one 128 x 128 tile of ``c`` per cube (see the module)."""
    sa = K.shared(K.f16, stages * PITCH * step)  # a's 128 x step slices, column-major
    sb = K.shared(K.f16, stages * (step + 8) * TILE)  # b's step x 128 slices, column-major
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
    stage_a = K.u32(PITCH * step)
    stage_b = pb * TILE
    for k0 in range(0, depth + (stages - 1) * step, step):  # stages - 1 slices ahead
        if k0 < depth:  # slice k0 into its stage: 16-byte copies of 8 elements
            sa0 = ((k0 // step) % stages) * stage_a
            sb0 = ((k0 // step) % stages) * stage_b
            for q in K.static_range(TILE * step // (8 * UNITS)):
                e = u + q * UNITS  # a: column e // 16 of the slice, rows 8 (e % 16)..
                ka = e // 16
                ra = (e % 16) * 8
                K.copy_async(sa, sa0 + ra + ka * PITCH, a, row0 + ra + (k0 + ka) * m, 8)
                kb = (e % K.u32(step // 8)) * 8  # b: column e // (step / 8), rows kb..
                jb = e // K.u32(step // 8)
                K.copy_async(sb, sb0 + kb + jb * pb, b, k0 + kb + (col0 + jb) * depth, 8)
        K.commit_copies()
        if k0 >= (stages - 1) * step:  # multiply the oldest slice in flight, landed by now
            K.wait_copies(stages - 1)
            K.sync_cube()
            sa0 = ((k0 // step - (stages - 1)) % stages) * stage_a
            sb0 = ((k0 // step - (stages - 1)) % stages) * stage_b
            for ks in range(K.u32(0), step, 16):
                K.load_fragment(fa0, sa, sa0 + wm + ks * PITCH, PITCH)
                K.load_fragment(fa1, sa, sa0 + wm + 16 + ks * PITCH, PITCH)
                K.load_fragment(fb0, sb, sb0 + ks + wn * pb, pb)
                K.load_fragment(fb1, sb, sb0 + ks + (wn + 16) * pb, pb)
                K.load_fragment(fb2, sb, sb0 + ks + (wn + 32) * pb, pb)
                K.load_fragment(fb3, sb, sb0 + ks + (wn + 48) * pb, pb)
                K.mma(c00, fa0, fb0, c00)
                K.mma(c01, fa0, fb1, c01)
                K.mma(c02, fa0, fb2, c02)
                K.mma(c03, fa0, fb3, c03)
                K.mma(c10, fa1, fb0, c10)
                K.mma(c11, fa1, fb1, c11)
                K.mma(c12, fa1, fb2, c12)
                K.mma(c13, fa1, fb3, c13)
            K.sync_cube()  # before the next step's copies refill this stage
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


#: Slice depths the bench times: the default, and half as deep (two stages of 32 each take
#: 37 KiB of shared memory; 64 would pass the 48 KiB every CUDA GPU gives a block).
STEPS = (DEPTH, 16)

__all__ = ["DEPTH", "STEPS", "TILE", "UNITS", "gemm_f16", "gemm_f16_count"]

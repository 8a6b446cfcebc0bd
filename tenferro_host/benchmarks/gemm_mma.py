# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""The f16 GEMM on the tensor cores' own instruction (m16n8k16 fragments: PTX ``mma.sync``
with ``ldmatrix`` on CUDA), f32 accumulate, autotuned over its block sizes.

``mma_gemm`` computes ``c = a @ b`` for column-major f16 ``a`` (m x k) and ``b`` (k x n) into
f32 ``c`` (m a multiple of ``BM``, n of ``BN``, k of ``BK``; the cube's ``32 WX WY`` units a
multiple of ``BM / 8`` and of ``BK / 8``, so that each unit copies the same rows of its columns
every time: its copies' addresses are computed once, not per copy). A cube of ``WX x WY`` warps
computes a ``BM x BN`` block of ``c``, each warp a ``BM / WX`` x ``BN / WY`` part of it as an
array of m16n8 accumulators. Per step it stages a ``BM x BK`` slice of ``a`` and a
``BK x BN`` slice of ``b`` in shared memory with 16-byte asynchronous copies, ``stages``
slices deep (the next slices load while this one is multiplied; one barrier per step: after
it, every unit is done with the previous slice, whose stage the next copies refill), both
column-major and padded
by 8 elements (16 bytes) per column, so the eight rows an ``ldmatrix`` reads fall in eight
different banks. Every fragment index is a constant of a ``K.static_range`` loop: the
fragments are registers.

The same kernel runs on the interpreter and WebGPU (slowly: a fragment there is each unit's
private copy), so the tests check it everywhere.

>>> mma_gemm_count(512, 256, 64, MMA_CONFIGS[0])
(4, 2)
"""

from __future__ import annotations

from .. import kernel as K
from ..errors import InvalidLaunchConfigError
from .tuned_gemm import ConfiguredGemm

PAD = 8  # elements (16 bytes) added to each staged column against bank conflicts


@K.kernel(max_units=256)
def mma_gemm(  # noqa: C901 - one kernel: a slice's copies, then its products, per step
    c: K.Array[K.f32],
    a: K.Array[K.f16],
    b: K.Array[K.f16],
    BM: K.Const[int] = 128,  # noqa: N803 - block sizes read as constants
    BN: K.Const[int] = 128,  # noqa: N803
    BK: K.Const[int] = 32,  # noqa: N803
    WX: K.Const[int] = 2,  # noqa: N803 - warps along m
    WY: K.Const[int] = 2,  # noqa: N803 - warps along n
    stages: K.Const[int] = 2,
):
    """``c = a @ b`` on tensor cores, one BM x BN block of ``c`` per cube (see the module)."""
    sa = K.shared(K.f16, stages * (BM + PAD) * BK)  # a's BM x BK slices, column-major
    sb = K.shared(K.f16, stages * (BK + PAD) * BN)  # b's BK x BN slices, column-major
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 8, 16, K.COL_MAJOR, BM // (16 * WX))
    fb = K.fragment(K.MATRIX_B, K.f16, 16, 8, 16, K.COL_MAJOR, BN // (8 * WY))
    acc = K.fragment(
        K.ACCUMULATOR, K.f32, 16, 8, 16, K.COL_MAJOR, (BM // (16 * WX), BN // (8 * WY))
    )
    for i in K.static_range(BM // (16 * WX)):
        for j in K.static_range(BN // (8 * WY)):
            K.fill_fragment(acc[i, j], 0.0)
    m = a.shape[0]
    depth = a.shape[1]
    u = K.UNIT_POS
    warp = u // 32
    wm = (warp % K.u32(WX)) * K.u32(BM // WX)  # the warp's first row and column in the block
    wn = (warp // K.u32(WX)) * K.u32(BN // WY)
    row0 = K.CUBE_POS_X * BM
    col0 = K.CUBE_POS_Y * BN
    pa = K.u32(BM + PAD)
    pb = K.u32(BK + PAD)
    ahead = K.u32((stages - 1) * BK)
    # The unit's copies of a step: rows ra.. ra + 7 of the a slice's columns ka + q * ca, rows
    # kb.. kb + 7 of the b slice's columns jb + q * cb (q = 0, 1, ..); from where, to where.
    ca = K.u32(32 * WX * WY // (BM // 8))
    cb = K.u32(32 * WX * WY // (BK // 8))
    ra = (u % K.u32(BM // 8)) * 8
    ka = u // K.u32(BM // 8)
    kb = (u % K.u32(BK // 8)) * 8
    jb = u // K.u32(BK // 8)
    a_from = row0 + ra + ka * m
    b_from = kb + (col0 + jb) * depth
    a_to = ra + ka * pa
    b_to = kb + jb * pb
    for t in range(0, depth + ahead, BK):  # step t: slice t's copies start, slice t - ahead's
        if t >= ahead:  # products run; its copies landed (all but the newest stages - 2 groups)
            K.wait_copies(stages - 2)
            K.sync_cube()  # everyone's copies of it landed; everyone is done with slice t - BK
        if t < depth:  # slice t into the stage slice t - stages BK left: 16-byte copies
            sa_at = ((t // BK) % stages) * (pa * BK) + a_to
            sb_at = ((t // BK) % stages) * (pb * BN) + b_to
            a_at = a_from + t * m
            b_at = b_from + t
            for q in K.static_range(BM * BK // (256 * WX * WY)):
                K.copy_async(sa, sa_at + q * ca * pa, a, a_at + q * ca * m, 8)
            for q in K.static_range(BK * BN // (256 * WX * WY)):
                K.copy_async(sb, sb_at + q * cb * pb, b, b_at + q * cb * depth, 8)
        K.commit_copies()
        if t >= ahead:
            sa0 = ((t // BK - (stages - 1)) % stages) * (pa * BK)
            sb0 = ((t // BK - (stages - 1)) % stages) * (pb * BN)
            for ks in K.static_range(0, BK, 16):
                for i in K.static_range(BM // (16 * WX)):
                    K.load_fragment(fa[i], sa, sa0 + wm + i * 16 + ks * pa, pa)
                for j in K.static_range(BN // (8 * WY)):
                    K.load_fragment(fb[j], sb, sb0 + ks + (wn + j * 8) * pb, pb)
                for i in K.static_range(BM // (16 * WX)):
                    for j in K.static_range(BN // (8 * WY)):
                        K.mma(acc[i, j], fa[i], fb[j], acc[i, j])
    at = row0 + wm + (col0 + wn) * m  # c's column-major position of the warp's first element
    for i in K.static_range(BM // (16 * WX)):
        for j in K.static_range(BN // (8 * WY)):
            K.store_fragment(c, at + i * 16 + j * 8 * m, acc[i, j], m)


def _config(bm: int, bn: int, bk: int, wx: int, wy: int, stages: int) -> K.Config:
    units = 32 * wx * wy
    if units % (bm // 8) or units % (bk // 8):
        raise ValueError(
            f"a cube of {units} units (32 WX WY) must be a multiple of BM / 8 = {bm // 8} and "
            f"of BK / 8 = {bk // 8}: each unit copies the same rows of its columns every step"
        )
    consts = {"BM": bm, "BN": bn, "BK": bk, "WX": wx, "WY": wy, "stages": stages}
    return K.Config(consts, dim=units)


#: Block sizes the tuner tries, the first the default: shared memory stays within CUDA's
#: static 48 KiB (128 x 128 x 32 in two stages: 37 KiB; 128 x 128 x 16 in four: 42 KiB).
MMA_CONFIGS = (
    _config(128, 128, 32, 2, 2, 2),
    _config(128, 128, 16, 2, 2, 3),
    _config(128, 128, 16, 2, 2, 4),
    _config(128, 256, 16, 2, 4, 2),
    _config(256, 128, 16, 4, 2, 2),
    _config(128, 128, 32, 2, 4, 2),
    _config(64, 128, 32, 2, 2, 2),
)


def mma_gemm_count(m: int, n: int, k: int, config: K.Config) -> tuple[int, int]:
    """The cube count of an m x n ``c`` (a sum over k) with ``config``'s block. The kernel has
    no edge blocks: a shape its blocks do not divide is an InvalidLaunchConfigError, not a
    partial ``c``."""
    ragged = [
        f"{name} = {size} is not a multiple of {block} = {config[block]}"
        for name, size, block in (("m", m, "BM"), ("n", n, "BN"), ("k", k, "BK"))
        if size % config[block]
    ]
    if ragged or not m or not n:
        raise InvalidLaunchConfigError(
            f"mma_gemm cannot compute a {m} x {n} x {k} product in config {config!r}: "
            + "; ".join(ragged or ["m and n must be at least one block"])
            + "; pad the operands to whole blocks or use TILED_GEMM, which takes any shape"
        )
    return (m // config["BM"], n // config["BN"])


#: The GEMM with its configs: ``MMA_GEMM.launch(js, c, a, b, config)``, ``MMA_GEMM.tuned``.
MMA_GEMM = ConfiguredGemm(mma_gemm, MMA_CONFIGS, mma_gemm_count)

__all__ = ["MMA_CONFIGS", "MMA_GEMM", "mma_gemm", "mma_gemm_count"]

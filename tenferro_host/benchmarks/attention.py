# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""Fused attention in the DSL: ``o = softmax(scale * q @ k^T) @ v`` per head, f16 in, f32
accumulate and out, in one pass over the keys (the online softmax of FlashAttention).

``q``, ``k`` and ``v`` hold ``heads`` blocks of ``S x D`` f16, row-major (``D`` contiguous,
as a ``(heads, S, D)`` torch tensor); ``o`` the same in f32. A cube of four warps takes ``BQ``
query rows of one head (cube ``(x, y)``: rows ``BQ x`` of head ``y``), each warp 16 of them,
and walks the keys ``BKV`` at a time:

1. the key and value blocks are copied into shared memory (16-byte asynchronous copies);
2. ``s = q k^T`` on tensor cores: the warp's query rows are m16n8k16 ``a`` fragments loaded
   once, the keys ``b`` fragments (``k``'s rows are the columns of ``k^T``);
3. ``s`` goes to shared memory; two units per row take its running maximum ``m`` and sum
   ``l`` (combined with ``K.subgroup_shuffle_xor``) and write ``p = exp(s - m)`` as f16;
4. ``o`` (accumulator fragments) goes through shared memory, where the same two units scale
   their row by ``exp(m_old - m)``, and back; then ``o += p v``.

At the end each row is divided by its ``l``. ``S`` is a multiple of ``BQ`` and ``BKV``.

>>> attention_count(4096, 16)
(64, 16)
"""

from __future__ import annotations

from .. import kernel as K

D = 64  # the head dimension
BQ = 64  # query rows per cube: 4 warps of 16
BKV = 32  # keys per step
UNITS = 128
PAD = 8  # f16 elements (16 bytes) added to each staged row against bank conflicts
PK = D + PAD  # row pitch of the staged keys and values
PS = BKV + 4  # row pitch of s (f32; 16-byte rows)
PP = BKV + PAD  # row pitch of p (f16)
PO = D + 4  # row pitch of o while it is rescaled (f32)
LOWEST = -1.0e30  # the running maximum before any key: exp(LOWEST - m) is 0


@K.kernel(max_units=UNITS)
def attention(  # noqa: C901 - one kernel: the steps of the online softmax, per key block
    o: K.Array[K.f32],
    q: K.Array[K.f16],
    k: K.Array[K.f16],
    v: K.Array[K.f16],
    seq: K.u32,
    scale: K.f32,
):
    """``o = softmax(scale * q @ k^T) @ v`` for ``BQ`` query rows of one head per cube."""
    sk = K.shared(K.f16, BKV * PK)  # the key block, row-major
    sv = K.shared(K.f16, BKV * PK)  # the value block, row-major
    ss = K.shared(K.f32, BQ * PS)  # s, then nothing: each warp its 16 rows
    sp = K.shared(K.f16, BQ * PP)  # p = exp(s - m), f16
    so = K.shared(K.f32, BQ * PO)  # o while it is rescaled, and at the end
    fq = K.fragment(K.MATRIX_A, K.f16, 16, 8, 16, K.ROW_MAJOR, D // 16)
    fk = K.fragment(K.MATRIX_B, K.f16, 16, 8, 16, K.COL_MAJOR, BKV // 8)
    fp = K.fragment(K.MATRIX_A, K.f16, 16, 8, 16, K.ROW_MAJOR, BKV // 16)
    fv = K.fragment(K.MATRIX_B, K.f16, 16, 8, 16, K.ROW_MAJOR, D // 8)
    fs = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, BKV // 8)
    fo = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, D // 8)
    u = K.UNIT_POS
    w16 = (u // 32) * 16  # the warp's first row in the cube's block
    head = K.CUBE_POS_Y * seq * D
    q0 = head + (K.CUBE_POS_X * BQ + w16) * D  # the warp's first query row in q and o
    row = w16 + (u % 32) // 2  # the row of the cube's block this unit takes in the softmax
    half = (u % 2) * (BKV // 2)  # and which half of its keys
    m = K.f32(LOWEST)
    total = K.f32(0)
    for d in K.static_range(D // 16):
        K.load_fragment(fq[d], q, q0 + d * 16, D)
    for j in K.static_range(D // 8):
        K.fill_fragment(fo[j], 0.0)
    for kb in range(0, seq, BKV):
        for c in K.static_range(BKV * D // (8 * UNITS)):  # 16-byte copies of 8 elements
            e = u + c * UNITS
            r = e // K.u32(D // 8)
            at = (e % K.u32(D // 8)) * 8
            K.copy_async(sk, r * PK + at, k, head + (kb + r) * D + at, 8)
            K.copy_async(sv, r * PK + at, v, head + (kb + r) * D + at, 8)
        K.commit_copies()
        K.wait_copies(0)
        K.sync_cube()
        for j in K.static_range(BKV // 8):  # s = q k^T: 16 rows x BKV keys per warp
            K.fill_fragment(fs[j], 0.0)
        for d in K.static_range(D // 16):
            for j in K.static_range(BKV // 8):
                K.load_fragment(fk[j], sk, j * 8 * PK + d * 16, PK)
                K.mma(fs[j], fq[d], fk[j], fs[j])
        for j in K.static_range(BKV // 8):
            K.store_fragment(ss, w16 * PS + j * 8, fs[j], PS)
        for j in K.static_range(D // 8):  # o so far, to be rescaled
            K.store_fragment(so, w16 * PO + j * 8, fo[j], PO)
        K.sync_cube()
        top = K.f32(LOWEST)
        for c in K.static_range(BKV // 2):
            top = K.max(top, ss[row * PS + half + c] * scale)
        top = K.max(top, K.subgroup_shuffle_xor(top, 1))
        grown = K.max(m, top)
        factor = K.exp(m - grown)
        part = K.f32(0)
        for c in K.static_range(BKV // 2):
            x = K.exp(ss[row * PS + half + c] * scale - grown)
            part += x
            sp[row * PP + half + c] = K.f16(x)
        total = total * factor + part + K.subgroup_shuffle_xor(part, 1)
        m = grown
        for c in K.static_range(D // 2):
            so[row * PO + (u % 2) * (D // 2) + c] *= factor
        K.sync_cube()
        for j in K.static_range(D // 8):
            K.load_fragment(fo[j], so, w16 * PO + j * 8, PO)
        for t in K.static_range(BKV // 16):  # o += p v
            K.load_fragment(fp[t], sp, w16 * PP + t * 16, PP)
            for j in K.static_range(D // 8):
                K.load_fragment(fv[j], sv, t * 16 * PK + j * 8, PK)
                K.mma(fo[j], fp[t], fv[j], fo[j])
        K.sync_cube()  # before the next block's copies and stores
    for j in K.static_range(D // 8):
        K.store_fragment(so, w16 * PO + j * 8, fo[j], PO)
    K.sync_cube()
    for c in K.static_range(D // 2):
        at = (u % 2) * (D // 2) + c
        o[head + (K.CUBE_POS_X * BQ + row) * D + at] = so[row * PO + at] / total


def attention_count(seq: int, heads: int) -> tuple[int, int]:
    """The cube count of ``heads`` heads of ``seq`` query rows."""
    return (seq // BQ, heads)


__all__ = ["BKV", "BQ", "UNITS", "D", "attention", "attention_count"]

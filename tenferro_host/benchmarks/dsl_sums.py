# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def,operator"
"""The DSL's sums of f32 (``bench/dsl_vs_cupy.py`` times them against ``cupy.sum``): each unit
sums a grid-stride part of ``x``, each cube its units' parts, and one ``K.atomic_add`` per cube
adds that into ``out[0]``. They differ in how a unit loads (:func:`dsl_sum`: four scalar loads
in flight; :func:`dsl_sum4`: 16-byte ``K.load4`` loads) and how a cube reduces (a tree in
shared memory, or :func:`dsl_sum_subgroup`'s subgroup sums).
"""

from __future__ import annotations

from .. import kernel as K

#: Units per cube of every sum.
SUM_CUBE = 256
#: 8 resident cubes of 256 units on each of the H200's 132 SMs: one wave.
SUM_CUBES = 1056


@K.func
def tree_sum(s, unit, n):
    """Sum ``s[0:n]`` into ``s[0]`` (``n`` a power of two); every unit of the cube calls it."""
    half = K.u32(n // 2)
    while half > 0:
        if unit < half:
            s[unit] += s[unit + half]
        K.sync_cube()
        half = half // 2


@K.kernel
def dsl_sum(out: K.Array[K.f32], x: K.Array[K.f32]):
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
def vector_part(x):
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
def dsl_sum4(out: K.Array[K.f32], x: K.Array[K.f32]):
    """``dsl_sum`` with 16-byte loads (:func:`vector_part`), then a tree per cube."""
    s = K.shared(K.f32, SUM_CUBE)
    unit = K.UNIT_POS
    s[unit] = vector_part(x)
    K.sync_cube()
    tree_sum(s, unit, SUM_CUBE)
    if unit == 0:
        K.atomic_add(out, 0, s[0])


@K.kernel
def dsl_sum_subgroup(out: K.Array[K.f32], x: K.Array[K.f32]):
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


__all__ = ["SUM_CUBE", "SUM_CUBES", "dsl_sum", "dsl_sum4", "dsl_sum_subgroup", "tree_sum"]

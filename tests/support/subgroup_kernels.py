"""Kernels with subgroup operations: the guide's proof kernels (a warp-shuffle sum, a fused
row softmax) and one kernel per construct."""

from tenferro_host import kernel as K


@K.func
def cube_max(partial: K.Array[K.f32], v: K.f32):
    """The maximum of ``v`` over the cube (every unit gets it)."""
    s = K.subgroup_max(v)
    if K.SUBGROUP_UNIT_POS == 0:
        partial[K.UNIT_POS // K.SUBGROUP_SIZE] = s
    K.sync_cube()
    w = partial[0]
    j = K.SUBGROUP_UNIT_POS
    while j < K.CUBE_DIM // K.SUBGROUP_SIZE:
        w = K.max(w, partial[j])
        j += K.SUBGROUP_SIZE
    r = K.subgroup_max(w)
    K.sync_cube()
    return r


@K.func
def cube_sum(partial: K.Array[K.f32], v: K.f32):
    """The sum of ``v`` over the cube (every unit gets it)."""
    s = K.subgroup_add(v)
    if K.SUBGROUP_UNIT_POS == 0:
        partial[K.UNIT_POS // K.SUBGROUP_SIZE] = s
    K.sync_cube()
    w = K.f32(0)
    j = K.SUBGROUP_UNIT_POS
    while j < K.CUBE_DIM // K.SUBGROUP_SIZE:
        w += partial[j]
        j += K.SUBGROUP_SIZE
    r = K.subgroup_add(w)
    K.sync_cube()
    return r


@K.kernel
def subgroup_sum(out: K.Array[K.f32], x: K.Array[K.f32]):
    """out[0] += sum(x): a grid-stride loop per unit, :func:`cube_sum` (subgroup sums, theirs
    through shared memory, one more subgroup sum) and one atomic per cube (at most 32
    subgroups per cube: up to 256 units with subgroups of 8 or more)."""
    partial = K.shared(K.f32, 32)
    acc = K.f32(0)
    i = K.ABSOLUTE_POS
    while i < x.len:
        acc += x[i]
        i += K.CUBE_DIM * K.CUBE_COUNT
    total = cube_sum(partial, acc)
    if K.UNIT_POS == 0:
        K.atomic_add(out, 0, total)


@K.kernel
def row_softmax(out: K.Array[K.f32], x: K.Array[K.f32]):
    """out[r, :] = softmax(x[r, :]), one cube per row: the row's max and sum of exponentials
    by subgroup reductions, x read twice and out written once."""
    partial = K.shared(K.f32, 32)
    r = K.CUBE_POS
    cols = x.shape[1]
    m = x[r, 0]
    c = K.UNIT_POS
    while c < cols:
        m = K.max(m, x[r, c])
        c += K.CUBE_DIM
    row_max = cube_max(partial, m)
    acc = K.f32(0)
    c = K.UNIT_POS
    while c < cols:
        acc += K.exp(x[r, c] - row_max)
        c += K.CUBE_DIM
    scale = 1.0 / cube_sum(partial, acc)
    c = K.UNIT_POS
    while c < cols:
        out[r, c] = K.exp(x[r, c] - row_max) * scale
        c += K.CUBE_DIM


@K.kernel
def subgroup_constructs(
    facts: K.Array[K.u32],
    red: K.Array[K.I],
    shuf: K.Array[K.I],
    ballot: K.Array[K.u32],
    x: K.Array[K.I],
):
    """Every construct once, at the top level (so WGSL's fallback runs it too)."""
    i = K.ABSOLUTE_POS
    v = x[i]
    facts[2 * i] = K.SUBGROUP_SIZE
    facts[2 * i + 1] = K.SUBGROUP_UNIT_POS
    red[3 * i] = K.subgroup_add(v)
    red[3 * i + 1] = K.subgroup_min(v)
    red[3 * i + 2] = K.subgroup_max(v)
    shuf[2 * i] = K.subgroup_shuffle_xor(v, K.u32(1))
    shuf[2 * i + 1] = K.subgroup_shuffle(v, K.SUBGROUP_UNIT_POS // 2)
    ballot[i] = K.subgroup_ballot(v > 0)


@K.kernel
def float_reductions(red: K.Array[K.f32], x: K.Array[K.f32]):
    """Float min/max (exact on every target) and a sum of exactly representable values."""
    i = K.ABSOLUTE_POS
    v = x[i]
    red[3 * i] = K.subgroup_add(v)
    red[3 * i + 1] = K.subgroup_min(v)
    red[3 * i + 2] = K.subgroup_max(v)


@K.kernel
def reductions_in_cube_uniform_branches(out: K.Array[K.f32], x: K.Array[K.f32]):
    """Even cubes sum, odd ones take the maximum: branches no subgroup splits."""
    i = K.ABSOLUTE_POS
    if K.CUBE_POS % 2 == 0:
        out[i] = K.subgroup_add(x[i])
    else:
        out[i] = K.subgroup_max(x[i])


@K.kernel
def divergent_subgroup_add(x: K.Array[K.f32]):
    """A subgroup sum taken by the even units only: the interpreter refuses it."""
    i = K.ABSOLUTE_POS
    if i % 2 == 0:
        x[i] = K.subgroup_add(x[i])  # DIVERGENT


@K.kernel
def shuffle_past_the_subgroup(out: K.Array[K.f32], x: K.Array[K.f32]):
    """Reads lane ``SUBGROUP_SIZE`` (one past the last): refused."""
    i = K.ABSOLUTE_POS
    out[i] = K.subgroup_shuffle(x[i], K.SUBGROUP_SIZE)  # PAST


@K.kernel
def shared_then_subgroup_add(out: K.Array[K.f32], n: K.u32):
    """A shared array sized at launch, then a subgroup sum of its elements: on WebGPU without
    subgroups the fallback's workgroup array comes on top of ``n`` floats."""
    s = K.shared(K.f32, n)
    u = K.UNIT_POS
    s[u] = K.f32(u)
    K.sync_cube()
    out[K.ABSOLUTE_POS] = K.subgroup_add(s[u])


@K.kernel
def shuffle_lane_40(out: K.Array[K.f32], x: K.Array[K.f32]):
    """A constant lane past a warp (and the fallback's subgroups), within a subgroup of 64."""
    i = K.ABSOLUTE_POS
    out[i] = K.subgroup_shuffle(x[i], 40)  # LANE40


@K.kernel
def shuffle_xor_mask_32(out: K.Array[K.f32], x: K.Array[K.f32]):
    """A constant mask that leaves a warp from every lane."""
    i = K.ABSOLUTE_POS
    out[i] = K.subgroup_shuffle_xor(x[i], 32)  # MASK32


@K.kernel
def shuffle_lane_128(out: K.Array[K.f32], x: K.Array[K.f32]):
    """A constant lane past every subgroup of every target."""
    i = K.ABSOLUTE_POS
    out[i] = K.subgroup_shuffle(x[i], 128)  # LANE128


@K.kernel
def float_add(x: K.Array[K.F]):
    """A subgroup sum of any float type (f32 only is a subgroup type)."""
    x[K.ABSOLUTE_POS] = K.subgroup_add(x[K.ABSOLUTE_POS])  # FLOAT_ADD


@K.kernel
def int_shuffle(x: K.Array[K.I]):
    """A shuffle of any int type (i32 and u32 only are subgroup types)."""
    x[K.ABSOLUTE_POS] = K.subgroup_shuffle(x[K.ABSOLUTE_POS], K.u32(0))  # INT_SHUFFLE

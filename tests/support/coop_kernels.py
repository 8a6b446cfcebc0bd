"""Kernels with shared memory, barriers, atomics and device functions, shared by the tests of
every target (kernels must live in a file)."""

from tenferro_host import kernel as K
from tenferro_host.benchmarks.dsl_sums import tree_sum

CUBE = 256


@K.kernel
def block_sum(out: K.Array[K.F], x: K.Array[K.F], cube: K.Const[int] = CUBE):
    """out[0] += the sum of x: a grid-stride loop per unit, a tree in shared memory per cube,
    one atomic per cube."""
    s = K.shared(K.F, cube)
    unit = K.UNIT_POS
    acc = K.F(0)
    i = K.ABSOLUTE_POS
    while i < x.len:
        acc += x[i]
        i += K.CUBE_DIM * K.CUBE_COUNT
    s[unit] = acc
    K.sync_cube()
    tree_sum(s, unit, cube)
    if unit == 0:
        K.atomic_add(out, 0, s[0])


@K.kernel
def column_sums(out: K.Array[K.F], m: K.Array[K.F], cube: K.Const[int] = CUBE):
    """out[c] = sum of column c of the matrix m (any strides): one cube per column."""
    s = K.shared(K.F, cube)
    unit = K.UNIT_POS
    c = K.CUBE_POS
    acc = K.F(0)
    if c < m.shape[1]:
        r = unit
        while r < m.shape[0]:
            acc += m[r, c]
            r += K.CUBE_DIM
    s[unit] = acc
    K.sync_cube()
    tree_sum(s, unit, cube)
    if unit == 0 and c < m.shape[1]:
        out[c] = s[0]


@K.kernel
def histogram(counts: K.Array[K.u32], x: K.Array[K.u32], bins: K.Const[int] = 64):
    """counts[b] += number of x[i] % bins == b: per-cube counts in shared memory, then merged."""
    local = K.shared(K.u32, bins)
    unit = K.UNIT_POS
    b = unit
    while b < bins:
        local[b] = K.u32(0)
        b += K.CUBE_DIM
    K.sync_cube()
    i = K.ABSOLUTE_POS
    if i < x.len:
        K.atomic_add(local, x[i] % bins, 1)
    K.sync_cube()
    b = unit
    while b < bins:
        K.atomic_add(counts, b, local[b])
        b += K.CUBE_DIM


@K.kernel
def prefix_sum(out: K.Array[K.F], x: K.Array[K.F], cube: K.Const[int] = CUBE):
    """Inclusive prefix sums within each cube (Hillis-Steele, double-buffered)."""
    a = K.shared(K.F, cube)
    b = K.shared(K.F, cube)
    unit = K.UNIT_POS
    i = K.ABSOLUTE_POS
    v = K.F(0)
    if i < x.len:
        v = x[i]
    a[unit] = v
    K.sync_cube()
    step = K.u32(1)
    flip = False
    while step < cube:
        if flip:
            v = b[unit]
            if unit >= step:
                v += b[unit - step]
            a[unit] = v
        else:
            v = a[unit]
            if unit >= step:
                v += a[unit - step]
            b[unit] = v
        K.sync_cube()
        flip = not flip
        step *= 2
    if i < x.len:
        out[i] = v


TILE = 16


@K.kernel
def matmul(c: K.Array[K.f32], a: K.Array[K.f32], b: K.Array[K.f32], tile: K.Const[int] = TILE):
    """c = a @ b (any strides): tile x tile cubes, tiles of a and b staged in shared memory."""
    ta = K.shared(K.f32, tile * tile)
    tb = K.shared(K.f32, tile * tile)
    tx = K.UNIT_POS_X
    ty = K.UNIT_POS_Y
    row = K.CUBE_POS_Y * tile + ty
    col = K.CUBE_POS_X * tile + tx
    n = a.shape[0]
    k = a.shape[1]
    m = b.shape[1]
    acc = K.f32(0)
    for t in range(0, (k + tile - 1) // tile):
        kk = t * tile
        va = K.f32(0)
        if row < n and kk + tx < k:
            va = a[row, kk + tx]
        ta[ty * tile + tx] = va
        vb = K.f32(0)
        if kk + ty < k and col < m:
            vb = b[kk + ty, col]
        tb[ty * tile + tx] = vb
        K.sync_cube()
        for q in range(K.u32(tile)):
            acc += ta[ty * tile + q] * tb[q * tile + tx]
        K.sync_cube()
    if row < n and col < m:
        c[row, col] = acc


@K.func
def apply_atomic(old, mem, v, op, slots):
    """old[i] = K.atomic_<op>(mem, i % slots, v[i]) for the op numbered ``op``."""
    i = K.ABSOLUTE_POS
    if i < v.len:
        j = i % slots
        if op == 0:
            old[i] = K.atomic_add(mem, j, v[i])
        elif op == 1:
            old[i] = K.atomic_min(mem, j, v[i])
        elif op == 2:
            old[i] = K.atomic_max(mem, j, v[i])
        elif op == 3:
            old[i] = K.atomic_exchange(mem, j, v[i])
        else:
            old[i] = K.atomic_compare_exchange(mem, j, v[i], v[i] + v[i])


@K.kernel
def atomic_float(
    old: K.Array[K.F], mem: K.Array[K.F], v: K.Array[K.F], op: K.Const[int], slots: K.Const[int]
):
    apply_atomic(old, mem, v, op, slots)


@K.kernel
def atomic_int(
    old: K.Array[K.I], mem: K.Array[K.I], v: K.Array[K.I], op: K.Const[int], slots: K.Const[int]
):
    apply_atomic(old, mem, v, op, slots)


@K.kernel
def shared_atomics(out: K.Array[K.F], x: K.Array[K.F]):
    """Per cube: out[8c + k] = sum and out[8c + 4 + k] = max of x over units u with u % 4 == k,
    through float atomics on shared memory."""
    s = K.shared(K.F, 8)
    u = K.UNIT_POS
    if u < 8:
        s[u] = K.select(u < 4, K.F(0), K.F(-1e30))
    K.sync_cube()
    v = K.F(0)
    if K.ABSOLUTE_POS < x.len:  # noqa: SIM300 - the thread's index, not a constant
        v = x[K.ABSOLUTE_POS]
    K.atomic_add(s, u % 4, v)
    K.atomic_max(s, 4 + u % 4, v)
    K.sync_cube()
    if u < 8:
        out[K.CUBE_POS * 8 + u] = s[u]


@K.func
def clamp_index(i, n):
    """min(i, n - 1), with an early return (device functions may return from anywhere)."""
    for k in range(3):
        if i < n:
            return i
        if k == 1:
            break
    return n - 1


@K.func
def scale(x: K.F, by):
    return x * by


@K.func
def gather_scaled(src: K.Array[K.F], i, by):
    return scale(src[clamp_index(i, src.len)], by)


@K.kernel
def device_functions(out: K.Array[K.F], src: K.Array[K.F]):
    """out[i] = 2 * src[min(i, len - 1)] through nested device functions."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = gather_scaled(src, i, 2)


@K.kernel
def transpose_nd(out: K.Array[K.F], m: K.Array[K.F]):
    """out[j, i] = m[i, j] with both arrays indexed by (row, column) through their strides."""
    i = K.ABSOLUTE_POS_X
    j = K.ABSOLUTE_POS_Y
    if i < m.shape[0] and j < m.shape[1]:
        out[j, i] = m[i, j]


@K.func
def twice(x: K.I):
    return x + x


@K.func
def store_positive(out, i, v):
    """A procedure: stores ``v`` only when it is positive (an early bare return)."""
    if v <= 0:
        return
    out[i] = v


@K.kernel
def device_procedures(out: K.Array[K.F], src: K.Array[K.F], idx: K.Array[K.i32]):
    """out[i] = src[2 * idx[i] % len] where that is positive; out[i] is kept elsewhere."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        store_positive(out, i, src[K.u32(twice(idx[i])) % src.len])

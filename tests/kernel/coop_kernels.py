"""Kernels with shared memory, barriers, atomics and device functions (DSL v2), shared by the
tests of every target (kernels must live in a file)."""

from tenferro_host import kernel as K

CUBE = 256


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

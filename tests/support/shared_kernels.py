"""Kernels with dynamic shared arrays (sized at launch by a scalar argument) and shared arrays of
more than one dimension."""

from tenferro_host import kernel as K

TILE = 8


@K.kernel
def dynamic_block_sum(out: K.Array[K.F], x: K.Array[K.F], n: K.u32):
    """out[cube] = the sum of the cube's ``n`` values of x (``n`` units per cube, a power of 2)."""
    s = K.shared(K.F, n)
    u = K.UNIT_POS
    i = K.ABSOLUTE_POS
    v = K.F(0)
    if i < x.len:
        v = x[i]
    s[u] = v
    K.sync_cube()
    half = s.len // 2
    while half > 0:
        if u < half:
            s[u] = s[u] + s[u + half]
        K.sync_cube()
        half = half // 2
    if u == 0:
        out[K.CUBE_POS] = s[0]


@K.kernel
def two_dynamic(out: K.Array[K.f32], n: K.u32, m: K.i32):
    """Two dynamic arrays (an odd-sized i32 one first, so the f32 one sits at an aligned offset)
    and a static one: out[i] = b[(u + 1) % n] + a[u % m] + c[u % 4]."""
    a = K.shared(K.i32, m)
    b = K.shared(K.f32, n)
    c = K.shared(K.f32, 4)
    u = K.UNIT_POS
    b[u] = K.f32(u) * 2.0
    if K.i32(u) < m:
        a[u] = K.i32(u) * 3
    if u < 4:
        c[u] = K.f32(100 * u)
    K.sync_cube()
    out[K.ABSOLUTE_POS] = b[(u + 1) % n] + K.f32(a[K.i32(u) % m]) + c[u % 4]


@K.kernel
def tile_transpose(out: K.Array[K.F], m: K.Array[K.F]):
    """out = m.T through a (TILE, TILE + 1) shared tile; cubes of TILE x TILE units."""
    tile = K.shared(K.F, (TILE, TILE + 1))
    tx = K.UNIT_POS_X
    ty = K.UNIT_POS_Y
    r = K.CUBE_POS_X * TILE + tx
    c = K.CUBE_POS_Y * TILE + ty
    if r < m.shape[0] and c < m.shape[1]:
        tile[tx, ty] = m[r, c]
    K.sync_cube()
    orow = K.CUBE_POS_Y * TILE + tx
    ocol = K.CUBE_POS_X * TILE + ty
    if orow < out.shape[0] and ocol < out.shape[1]:
        out[orow, ocol] = tile[ty, tx]


@K.kernel
def tile_facts(out: K.Array[K.u32]):
    """The facts of a 3-D shared array: len, shape and (column-major) strides."""
    t = K.shared(K.f32, (2, 3, 5))
    if K.ABSOLUTE_POS == 0:
        out[0] = t.len
        out[1] = t.shape[0]
        out[2] = t.shape[1]
        out[3] = t.shape[2]
        out[4] = t.stride[0]
        out[5] = t.stride[1]
        out[6] = t.stride[2]


@K.kernel
def dynamic_out_of_bounds(out: K.Array[K.f32], n: K.u32):
    s = K.shared(K.f32, n)
    s[K.UNIT_POS] = 1.0  # OOB
    K.sync_cube()
    out[K.ABSOLUTE_POS] = s[K.UNIT_POS]

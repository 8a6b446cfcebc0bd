"""Kernels with vector accesses: ``a, b, c, d = K.load4(x, k)`` and ``K.store4(x, k, ...)``."""

from tenferro_host import kernel as K


@K.kernel
def scale4(out: K.Array[K.F], x: K.Array[K.F], alpha: K.F):
    """out = alpha * x, four elements per unit (``out.len`` a multiple of 4)."""
    k = K.ABSOLUTE_POS
    if k < out.len // 4:
        a, b, c, d = K.load4(x, k)
        K.store4(out, k, alpha * a, alpha * b, alpha * c, alpha * d)


@K.kernel
def reverse4_through_shared(out: K.Array[K.i32], x: K.Array[K.i32]):
    """Each cube stages 4 values per unit in shared memory with vector accesses and writes
    each unit's four reversed."""
    s = K.shared(K.i32, 128)
    u = K.UNIT_POS
    k = K.ABSOLUTE_POS
    a, b, c, d = K.load4(x, k)
    K.store4(s, u, d, c, b, a)
    K.sync_cube()
    e, f, g, h = K.load4(s, u)
    K.store4(out, k, e, f, g, h)


@K.kernel
def sum4(out: K.Array[K.f32], x: K.Array[K.f32]):
    """out[k] = x[4k] + x[4k+1] + x[4k+2] + x[4k+3], for any 1-D view of x."""
    k = K.ABSOLUTE_POS
    if k < out.len:
        a, b, c, d = K.load4(x, k)
        out[k] = (a + b) + (c + d)


@K.kernel
def load4_into_a_non_compact_matrix(out: K.Array[K.f32], m: K.Array[K.f32]):
    a, b, c, d = K.load4(m, K.ABSOLUTE_POS)  # MATRIX
    out[0] = a + b + c + d


@K.kernel
def load4_as_a_value(out: K.Array[K.f32], x: K.Array[K.f32]):
    out[0] = K.load4(x, 0)  # VALUE


@K.kernel
def load4_into_three(out: K.Array[K.f32], x: K.Array[K.f32]):
    a, b, c = K.load4(x, 0)  # THREE
    out[0] = a + b + c


@K.kernel
def store4_of_a_wrong_type(out: K.Array[K.f32], n: K.i32):
    K.store4(out, 0, n, n, n, n)  # TYPE

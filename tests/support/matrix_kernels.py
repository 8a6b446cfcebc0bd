"""Kernels with matrix fragments (``K.fragment``, ``K.mma`` ...), and misuses of them."""

from tenferro_host import kernel as K


@K.kernel
def tile_col(c: K.Array[K.f32], a: K.Array[K.f16], b: K.Array[K.f16], ld: K.u32):
    """Warp w: c = a @ b + c for the column-major 16 x 16 tiles starting at 256 w (leading
    dimension ``ld``) of every array; c is loaded, so the accumulator's load is exercised."""
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.COL_MAJOR)
    fb = K.fragment(K.MATRIX_B, K.f16, 16, 16, 16, K.COL_MAJOR)
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    at = (K.UNIT_POS // 32 + K.CUBE_POS * (K.CUBE_DIM // 32)) * 16 * ld
    K.load_fragment(fa, a, at, ld)
    K.load_fragment(fb, b, at, ld)
    K.load_fragment(acc, c, at, ld)
    K.mma(acc, fa, fb, acc)
    K.store_fragment(c, at, acc, ld)


@K.kernel
def tile_row_shared(
    d: K.Array[K.f32], a: K.Array[K.f16], b: K.Array[K.f16], m: K.Const[int], n: K.Const[int]
):
    """One warp: d = a @ b for row-major m x 16 a and 16 x n b, staged in shared memory, into a
    separate accumulator from a zero-filled one (d and c distinct); d is row-major."""
    sa = K.shared(K.f16, 512)
    sb = K.shared(K.f16, 512)
    u = K.UNIT_POS
    for t in range(K.u32(16)):
        e = u + 32 * t
        if e < m * 16:
            sa[e] = a[e]
        if e < n * 16:
            sb[e] = b[e]
    K.sync_cube()
    fa = K.fragment(K.MATRIX_A, K.f16, m, n, 16, K.ROW_MAJOR)
    fb = K.fragment(K.MATRIX_B, K.f16, m, n, 16, K.ROW_MAJOR)
    zero = K.fragment(K.ACCUMULATOR, K.f32, m, n, 16, K.ROW_MAJOR)
    out = K.fragment(K.ACCUMULATOR, K.f32, m, n, 16, K.ROW_MAJOR)
    K.fill_fragment(zero, 0.0)
    K.load_fragment(fa, sa, 0, 16)
    K.load_fragment(fb, sb, 0, n)
    K.mma(out, fa, fb, zero)
    K.store_fragment(d, 0, out, n)


@K.kernel
def fill_and_store(c: K.Array[K.f32], v: K.f32):
    """Every warp fills a 16 x 16 accumulator with v and stores it at 256 w, ld 16."""
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.fill_fragment(acc, v)
    K.store_fragment(c, (K.ABSOLUTE_POS // 32) * 256, acc, 16)


@K.kernel
def divergent_warp(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    if K.UNIT_POS < 16:
        K.fill_fragment(acc, 1.0)  # DIVERGENT


@K.kernel
def start_per_unit(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.fill_fragment(acc, 1.0)
    K.store_fragment(c, K.UNIT_POS * 16, acc, 16)  # PER_UNIT


@K.kernel
def store_unwritten(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.store_fragment(c, 0, acc, 16)  # UNWRITTEN


@K.kernel
def misaligned(c: K.Array[K.f32], start: K.u32, ld: K.u32):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.fill_fragment(acc, 1.0)
    K.store_fragment(c, start, acc, ld)  # MISALIGNED


@K.kernel
def store_race(c: K.Array[K.f32]):
    """A fragment stored to shared memory and read back by a unit with no barrier between."""
    s = K.shared(K.f32, 256)
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.fill_fragment(acc, 1.0)
    K.store_fragment(s, 0, acc, 16)
    c[K.UNIT_POS] = s[K.UNIT_POS]  # RACE


@K.kernel
def a_of_f32(c: K.Array[K.f32]):
    fa = K.fragment(K.MATRIX_A, K.f32, 16, 16, 16, K.ROW_MAJOR)  # noqa: F841 DTYPE


@K.kernel
def shape_m4(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 4, 4, 4, K.ROW_MAJOR)  # noqa: F841 SHAPE


@K.kernel
def accumulator_of_f16(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f16, 16, 16, 16, K.ROW_MAJOR)  # noqa: F841 DTYPE


@K.kernel
def shape_k8(c: K.Array[K.f32]):
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 16, 8, K.ROW_MAJOR)  # noqa: F841 SHAPE


@K.kernel
def store_of_a(c: K.Array[K.f16]):
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.ROW_MAJOR)
    K.fill_fragment(fa, 1.0)
    K.store_fragment(c, 0, fa, 16)  # STORE_A


@K.kernel
def mma_shapes(c: K.Array[K.f32]):
    fa = K.fragment(K.MATRIX_A, K.f16, 32, 8, 16, K.ROW_MAJOR)
    fb = K.fragment(K.MATRIX_B, K.f16, 16, 16, 16, K.ROW_MAJOR)
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.mma(acc, fa, fb, acc)  # SHAPES


@K.kernel
def fragment_in_loop(c: K.Array[K.f32]):
    for _ in range(2):
        acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)  # noqa: F841 NESTED


@K.kernel
def fragment_as_value(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    c[0] = acc  # VALUE


@K.kernel
def load_of_other_type(c: K.Array[K.f32]):
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.ROW_MAJOR)
    K.load_fragment(fa, c, 0, 16)  # TYPE


@K.kernel
def load_of_a_matrix(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.load_fragment(acc, c, 0, 16)  # MATRIX


@K.kernel
def store_beside_atomics(c: K.Array[K.f32], back: K.Array[K.f32]):
    """A warp stores a filled tile into c[0:256] while every unit adds 1 to c[256] atomically
    (so c's memory is atomic on WebGPU), then loads the tile back and stores it into back."""
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    again = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.COL_MAJOR)
    K.fill_fragment(acc, 3.0)
    K.store_fragment(c, 0, acc, 16)
    K.atomic_add(c, 256, K.f32(1))
    K.sync_cube()
    K.load_fragment(again, c, 0, 16)
    K.store_fragment(back, 0, again, 16)


@K.kernel
def load_of_dynamic_shared(c: K.Array[K.f32], n: K.u32):
    s = K.shared(K.f32, n)
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.load_fragment(acc, s, 0, 16)  # DYNAMIC


@K.kernel
def fragment_unnamed(c: K.Array[K.f32]):
    K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)  # UNNAMED


@K.kernel
def statement_as_value(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    x = K.fill_fragment(acc, 1.0)  # noqa: F841 AS_VALUE


@K.kernel
def fill_of_one_argument(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    K.fill_fragment(acc)  # ARITY


@K.func
def fill_in_a_function(c):
    K.fill_fragment(c, 1.0)  # IN_FUNC


@K.kernel
def fragment_statement_in_a_function(c: K.Array[K.f32]):
    fill_in_a_function(c)


@K.kernel
def fragment_pair(c: K.Array[K.f32]):
    fa, fb = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.ROW_MAJOR)  # noqa: RUF059 TUPLE


@K.kernel
def fragment_of_five(c: K.Array[K.f32]):
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16)  # noqa: F841 FIVE


@K.kernel
def fragment_named_as_a_parameter(c: K.Array[K.f32]):
    c = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)  # noqa: F841 REDECLARED


@K.kernel
def layout_as_use(c: K.Array[K.f32]):
    fa = K.fragment(K.ROW_MAJOR, K.f16, 16, 16, 16, K.ROW_MAJOR)  # noqa: F841 USE


@K.kernel
def value_into_a_fragment(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 16, 16, K.ROW_MAJOR)
    acc = 1.0  # noqa: F841 ASSIGNED


@K.kernel
def runtime_dimension(c: K.Array[K.f32], m: K.u32):
    acc = K.fragment(K.ACCUMULATOR, K.f32, m, 16, 16, K.ROW_MAJOR)  # noqa: F841 RUNTIME


@K.kernel
def tile_mma(d: K.Array[K.f32], a: K.Array[K.f16], b: K.Array[K.f16], la: K.Const[int]):
    """One warp: d (16 x 16, column-major, ld 16) = a (16 x 32, column-major, ld ``la``) @ b
    (32 x 16, row-major, ld 16) from shared memory, in m16n8k16 fragment arrays."""
    sa = K.shared(K.f16, 1024)
    sb = K.shared(K.f16, 512)
    u = K.UNIT_POS
    for t in range(K.u32(32)):
        sa[u + 32 * t] = a[u + 32 * t]
    for t in range(K.u32(16)):
        sb[u + 32 * t] = b[u + 32 * t]
    K.sync_cube()
    fa = K.fragment(K.MATRIX_A, K.f16, 16, 8, 16, K.COL_MAJOR, 2)
    fb = K.fragment(K.MATRIX_B, K.f16, 16, 8, 16, K.ROW_MAJOR, (2, 2))
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.COL_MAJOR, 2)
    for j in K.static_range(2):
        K.fill_fragment(acc[j], 0.0)
    for s in K.static_range(2):
        K.load_fragment(fa[s], sa, s * 16 * la, la)
        for j in K.static_range(2):
            K.load_fragment(fb[s, j], sb, s * 256 + j * 8, 16)
            K.mma(acc[j], fa[s], fb[s, j], acc[j])
    for j in K.static_range(2):
        K.store_fragment(d, j * 128, acc[j], 16)


@K.kernel
def array_at_runtime_index(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, 2)
    K.fill_fragment(acc[K.UNIT_POS // 32], 1.0)  # RUNTIME_INDEX


@K.kernel
def array_out_of_range(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, 2)
    K.fill_fragment(acc[2], 1.0)  # OUT_OF_RANGE


@K.kernel
def array_unindexed(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, 2)
    K.fill_fragment(acc, 1.0)  # UNINDEXED


@K.kernel
def array_of_one_index_too_few(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, (2, 2))
    K.fill_fragment(acc[1], 1.0)  # RANK


@K.kernel
def array_too_large(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, (8, 9))  # noqa: F841 LARGE


@K.kernel
def array_over_a_fragment(c: K.Array[K.f32]):
    acc__1 = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR)  # noqa: F841
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, 2)  # noqa: F841 ELEMENT


@K.kernel
def array_element_as_value(c: K.Array[K.f32]):
    acc = K.fragment(K.ACCUMULATOR, K.f32, 16, 8, 16, K.ROW_MAJOR, 2)
    c[0] = acc[0]  # ELEMENT_VALUE


@K.kernel
def array_of_values_as_fragments(c: K.Array[K.f32]):
    K.fill_fragment(c[0], 1.0)  # NOT_FRAGMENTS

"""Kernels that exercise every IR construct on WebGPU (kernels must live in a file)."""

from tenferro_host import kernel as K

#: Slots per thread written by :func:`indices`.
INDEX_SLOTS = 20


@K.kernel
def indices(out: K.Array[K.u32]):
    """Every launch index of every thread (out has INDEX_SLOTS slots per thread)."""
    t = K.ABSOLUTE_POS
    base = t * 20
    if base < out.len:
        out[base + 0] = K.ABSOLUTE_POS
        out[base + 1] = K.ABSOLUTE_POS_X
        out[base + 2] = K.ABSOLUTE_POS_Y
        out[base + 3] = K.ABSOLUTE_POS_Z
        out[base + 4] = K.UNIT_POS
        out[base + 5] = K.UNIT_POS_X
        out[base + 6] = K.UNIT_POS_Y
        out[base + 7] = K.UNIT_POS_Z
        out[base + 8] = K.CUBE_POS
        out[base + 9] = K.CUBE_POS_X
        out[base + 10] = K.CUBE_POS_Y
        out[base + 11] = K.CUBE_POS_Z
        out[base + 12] = K.CUBE_DIM
        out[base + 13] = K.CUBE_DIM_X
        out[base + 14] = K.CUBE_DIM_Y
        out[base + 15] = K.CUBE_DIM_Z
        out[base + 16] = K.CUBE_COUNT
        out[base + 17] = K.CUBE_COUNT_X
        out[base + 18] = K.CUBE_COUNT_Y
        out[base + 19] = K.CUBE_COUNT_Z


@K.kernel
def int_ops(out: K.Array[K.I], a: K.Array[K.I], b: K.Array[K.I]):
    """Integer arithmetic (b has no zeros): wrap-around, truncating // and %, min/max/abs."""
    i = K.ABSOLUTE_POS
    if i < a.len:
        x = a[i]
        y = b[i]
        out[8 * i] = x + y
        out[8 * i + 1] = x - y
        out[8 * i + 2] = x * y
        out[8 * i + 3] = x // y
        out[8 * i + 4] = x % y
        out[8 * i + 5] = K.min(x, y) + K.max(x, y)
        out[8 * i + 6] = K.select(x < y, K.abs(x), -y)
        out[8 * i + 7] = K.I(x == y) + K.I(x != y and x >= y)


@K.kernel
def float_ops(out: K.Array[K.F], a: K.Array[K.F], b: K.Array[K.F]):
    """Float arithmetic and math functions (b has no zeros, a and b are moderate)."""
    i = K.ABSOLUTE_POS
    if i < a.len:
        x = a[i]
        y = b[i]
        out[12 * i] = x / y + x * y - x
        out[12 * i + 1] = x // y
        out[12 * i + 2] = x % y
        out[12 * i + 3] = K.sqrt(K.abs(x)) + K.exp(y * 0.25)
        out[12 * i + 4] = K.log(K.abs(y) + 1.0)
        out[12 * i + 5] = K.sin(x) + K.cos(y)
        out[12 * i + 6] = K.tanh(x * 0.5)
        out[12 * i + 7] = K.floor(x) + K.ceil(y)
        out[12 * i + 8] = K.fma(x, y, 1.5)
        out[12 * i + 9] = K.min(x, y) - K.max(x, y)
        out[12 * i + 10] = K.abs(y) ** 1.5
        out[12 * i + 11] = -x


@K.kernel
def casts(
    ints: K.Array[K.i32],
    uints: K.Array[K.u32],
    floats: K.Array[K.f32],
    flags: K.Array[K.bool_],
    x: K.Array[K.f32],
):
    """Conversions: float->int truncates, ->bool is != 0, bool->number is 0/1."""
    i = K.ABSOLUTE_POS
    if i < x.len:
        v = x[i]
        ints[i] = K.i32(v) + K.i32(flags[i])
        uints[i] = K.u32(K.abs(v)) + K.u32(K.i32(v))
        floats[i] = K.f32(K.i32(v)) + K.f32(K.bool_(v))
        flags[i] = K.bool_(K.i32(v)) or not flags[i]


@K.kernel
def threshold(out: K.Array[K.bool_], x: K.Array[K.F], t: K.F):
    """out[i] = x[i] > t (a bool array stored as u32)."""
    i = K.ABSOLUTE_POS
    if i < x.len:
        out[i] = x[i] > t


@K.kernel
def masked_pick(out: K.Array[K.F], mask: K.Array[K.bool_], a: K.Array[K.F], b: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = K.select(mask[i], a[i], b[i])


@K.kernel
def control(out: K.Array[K.i32], n: K.u32, step: K.i32, flag: K.bool_):
    """for with continue and a runtime step, while with break, early return."""
    i = K.ABSOLUTE_POS
    if i >= out.len:
        return
    acc = K.i32(0)
    for j in range(0, n, 2):
        if j == 6:
            continue
        acc += K.i32(j)
    for k in range(K.i32(i), K.i32(-5), step):
        acc += k
    w = K.i32(10)
    while w > -30:
        w -= K.i32(i % 7) + 1
        if w < 0 and flag:
            break
    out[i] = acc * 100 + w


@K.kernel
def scale_const(out: K.Array[K.F], x: K.Array[K.F], factor: K.Const[float]):
    """A compile-time constant folded into the shader."""
    i = K.ABSOLUTE_POS
    if i < x.len:
        out[i] = x[i] * factor


@K.kernel
def constant_overflow(out: K.Array[K.f32]):
    """A constant-only expression WGSL would evaluate at compile time, and reject (inf)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = K.f32(3e38) * K.f32(10.0)


@K.kernel
def f64_scalar(out: K.Array[K.f32], s: K.f64):
    """An f64 parameter: never requested on WebGPU."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = K.f32(s)


@K.kernel
def copy_f16(out: K.Array[K.f32], x: K.Array[K.f32], h: K.f16):
    """An f16 scalar next to f32 arrays (needs shader-f16)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] + K.f32(h)


@K.kernel
def min_max(out: K.Array[K.F], a: K.Array[K.F], b: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        out[2 * i] = K.min(a[i], b[i])
        out[2 * i + 1] = K.max(a[i], b[i])


@K.kernel
def inline_f16(out: K.Array[K.f32], x: K.Array[K.f32]):
    """f16 values only inside expressions (no f16 local or parameter)."""
    i = K.ABSOLUTE_POS
    if i < x.len:
        out[i] = K.f32(K.f16(x[i]) * K.f16(0.5))


@K.kernel
def inline_i64(out: K.Array[K.f32], x: K.Array[K.f32]):
    """An i64 value only inside an expression."""
    i = K.ABSOLUTE_POS
    if i < x.len:
        out[i] = x[i] + K.f32(K.i64(i) // K.i64(2))

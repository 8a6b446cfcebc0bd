"""Small kernels covering every language construct, shared by the interpreter and codegen tests."""

from tenferro_host import kernel as K


@K.kernel
def arith_float(out: K.Array[K.F], a: K.Array[K.F], b: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        k = i * 7
        out[k] = a[i] + b[i]
        out[k + 1] = a[i] - b[i]
        out[k + 2] = a[i] * b[i]
        out[k + 3] = a[i] / b[i]
        out[k + 4] = a[i] // b[i]
        out[k + 5] = a[i] % b[i]
        out[k + 6] = -a[i] + 0.5


@K.kernel
def arith_int(out: K.Array[K.I], a: K.Array[K.I], b: K.Array[K.I]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        k = i * 6
        out[k] = a[i] + b[i]
        out[k + 1] = a[i] - b[i]
        out[k + 2] = a[i] * b[i]
        out[k + 3] = a[i] // b[i]
        out[k + 4] = a[i] % b[i]
        out[k + 5] = a[i] * 3 - 1


@K.kernel
def u32_wrap(out: K.Array[K.u32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = i - 5


@K.kernel
def power_and_math(out: K.Array[K.F], a: K.Array[K.F], b: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        x = K.abs(a[i]) + 0.25
        k = i * 14
        out[k] = x ** b[i]
        out[k + 1] = x**2
        out[k + 2] = K.sqrt(x)
        out[k + 3] = K.exp(a[i])
        out[k + 4] = K.log(x)
        out[k + 5] = K.sin(a[i])
        out[k + 6] = K.cos(a[i])
        out[k + 7] = K.tanh(a[i])
        out[k + 8] = K.abs(a[i])
        out[k + 9] = K.floor(a[i])
        out[k + 10] = K.ceil(a[i])
        out[k + 11] = K.min(a[i], b[i])
        out[k + 12] = K.max(a[i], b[i])
        out[k + 13] = K.fma(a[i], b[i], x)


@K.kernel
def int_math(out: K.Array[K.i32], a: K.Array[K.i32], b: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        out[3 * i] = K.abs(a[i])
        out[3 * i + 1] = K.min(a[i], b[i])
        out[3 * i + 2] = K.max(a[i], b[i])


@K.kernel
def casts(
    f: K.Array[K.f32],
    i: K.Array[K.i32],
    u: K.Array[K.u32],
    h: K.Array[K.f16],
    d: K.Array[K.f64],
    bo: K.Array[K.bool_],
    src: K.Array[K.f32],
):
    t = K.ABSOLUTE_POS
    if t < src.len:
        x = src[t]
        i[t] = K.i32(x)
        u[t] = K.u32(K.abs(x))
        h[t] = K.f16(x)
        d[t] = K.f64(x) * 2.0
        bo[t] = K.bool_(K.i32(x))
        f[t] = K.f32(bo[t]) + K.f32(K.i64(x))


@K.kernel
def generic_zero_and_literals(out: K.Array[K.F], n: K.I):
    i = K.ABSOLUTE_POS
    if i < out.len:
        acc = K.F(0)
        j = K.I(0)
        while j < n:
            acc += 0.1
            j += 1
        out[i] = acc


@K.kernel
def branches(out: K.Array[K.i32], a: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    if i >= a.len:
        return
    v = a[i]
    if v < -10:
        out[i] = 1
    elif v < 0 or v == 5:
        out[i] = 2
    elif not (v < 10):
        out[i] = 3
    else:
        out[i] = 4
    if 0 <= v < 3 and v != 1:
        out[i] += 10


@K.kernel
def loops(out: K.Array[K.i32], n: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    if i < n.len:
        total = K.i32(0)
        for j in range(n[i]):
            if j == 7:
                break
            if j % 2 == 1:
                continue
            total += j
        for j in range(10, 0, -3):
            total += j * 100
        for _j in range(K.i32(2), n[i]):
            total += 1000
        k = K.i32(0)
        while True:
            k += 1
            if k > n[i]:
                break
            if k == 2:
                continue
            total += 10000
        out[i] = total


@K.kernel
def loop_counter_after_loop(out: K.Array[K.u32], step: K.u32):
    i = K.ABSOLUTE_POS
    if i < out.len:
        for j in range(i, 10, step):  # noqa: B007 - read after the loop on purpose
            pass
        out[i] = j


@K.kernel
def select_and_bools(out: K.Array[K.F], flags: K.Array[K.bool_], a: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        out[i] = K.select(flags[i] and a[i] > 0, a[i], -1.0)
        flags[i] = not flags[i]


@K.kernel
def short_circuit(out: K.Array[K.F], a: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < a.len and a[i] > 0:
        out[i] = 1.0
    if i >= a.len or a[i] <= 0:
        return
    out[i] += 1.0


@K.kernel
def grid_indices(out: K.Array[K.u32]):
    t = K.ABSOLUTE_POS
    base = t * 12
    out[base] = K.UNIT_POS
    out[base + 1] = K.UNIT_POS_X
    out[base + 2] = K.UNIT_POS_Y
    out[base + 3] = K.UNIT_POS_Z
    out[base + 4] = K.CUBE_POS
    out[base + 5] = K.CUBE_POS_X
    out[base + 6] = K.CUBE_POS_Y
    out[base + 7] = K.CUBE_POS_Z
    out[base + 8] = K.ABSOLUTE_POS_X
    out[base + 9] = K.ABSOLUTE_POS_Y
    out[base + 10] = K.ABSOLUTE_POS_Z
    out[base + 11] = K.CUBE_DIM * 1000 + K.CUBE_COUNT + K.CUBE_DIM_Y * 100 + K.CUBE_COUNT_Z * 10


@K.kernel
def unguarded(out: K.Array[K.F], x: K.Array[K.F]):
    out[K.ABSOLUTE_POS] = x[K.ABSOLUTE_POS]


@K.kernel
def divide(out: K.Array[K.i32], a: K.Array[K.i32], b: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    if i < a.len:
        out[i] = a[i] // b[i]


@K.kernel
def scalar_kinds(
    out: K.Array[K.f16],
    wide: K.Array[K.i64],
    flag: K.bool_,
    h: K.f16,
    n: K.i64,
    u: K.u32,
    scale: K.Const[float] = 0.5,
):
    i = K.ABSOLUTE_POS
    if flag and i < out.len:
        out[i] = h * scale + K.f16(u) - K.f16(1e9)
        wide[i] = -n * 3 + K.i64(i) // 2 - K.i64(-9223372036854775807 - 1) % 7
        step = K.i64(0) - n
        for k in range(n, K.i64(0), step):
            wide[i] += k

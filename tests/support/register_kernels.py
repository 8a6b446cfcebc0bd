"""Kernels with register arrays (``K.registers``) and unrolled loops (``K.static_range``), run
on every target against the interpreter and numpy."""

from tenferro_host import kernel as K

ROWS, COLS = 2, 4


@K.kernel
def scaled_row_sums(out: K.Array[K.f32], x: K.Array[K.f32]):
    """out[u] = 2 * the sum of x[8u : 8u + 8], through a 2 x 4 register array (column-major),
    plus its length and its second dimension."""
    r = K.registers(K.f32, (ROWS, COLS))
    u = K.ABSOLUTE_POS
    for i in K.static_range(ROWS):
        for j in K.static_range(COLS):
            r[i, j] = x[u * 8 + i * COLS + j] * 2.0
    s = K.f32(0)
    for i in K.static_range(ROWS):
        for j in K.static_range(COLS):
            s += r[i, j]
    out[u] = s + K.f32(r.len + r.shape[1])


@K.kernel
def picked(out: K.Array[K.I], x: K.Array[K.I], k: K.u32):
    """out[u] = x[16u + (k + u) % 16]: a register array read at an index known at run time
    only (correct, if not in registers on CUDA), zeros where nothing was stored."""
    r = K.registers(K.I, 16)
    u = K.ABSOLUTE_POS
    for i in K.static_range(0, 16, 2):  # the odd elements stay zero
        r[i] = x[u * 16 + i]
    out[u] = r[(k + u) % 16]


@K.kernel
def steps(out: K.Array[K.i32]):
    """Every form of K.static_range: its counter meets u32 and i32 operands as a literal does."""
    u = K.ABSOLUTE_POS
    total = K.i32(0)
    for i in K.static_range(3):
        total += i
    for i in K.static_range(10, 4, -3):  # 10, 7
        total += i * 100
    for i in K.static_range(2, 2):  # noqa: B007 - no trip
        total += 1000
    count = K.u32(0)
    for i in K.static_range(1, 5):
        count += i
    out[u] = total + K.i32(count)


@K.kernel
def prefix_in_registers(out: K.Array[K.f64], x: K.Array[K.f64]):
    """The running sums of each unit's 6 values (f64), then stored back in order."""
    r = K.registers(K.f64, 6)
    u = K.ABSOLUTE_POS
    for i in K.static_range(6):
        r[i] = x[6 * u + i]
    for i in K.static_range(1, 6):
        r[i] += r[i - 1]
    for i in K.static_range(6):
        out[6 * u + i] = r[i]

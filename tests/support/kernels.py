"""Example kernels shared by the tests and the documentation (kernels must live in a file)."""

from tenferro_host import kernel as K
from tenferro_host.benchmarks.kernels import dsl_add as add  # out = lhs + rhs, the suite's add
from tenferro_host.benchmarks.kernels import saxpy  # out = a * x + y (docs/contract.md)


@K.kernel
def transpose_2d(out: K.Array[K.F], src: K.Array[K.F]):
    """Copy any-strided 2-D ``src`` into compact column-major ``out`` (same shape)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        rows = src.shape[0]
        r = i % rows
        c = i // rows
        out[i] = src[r, c]


@K.kernel
def row_sums(out: K.Array[K.F], m: K.Array[K.F]):
    """out[r] = sum of row r of the column-major matrix ``m`` (one thread per row)."""
    r = K.ABSOLUTE_POS
    if r < m.shape[0]:
        acc = K.F(0)
        for c in range(m.shape[1]):
            acc += m[r, c]
        out[r] = acc


__all__ = ["add", "row_sums", "saxpy", "transpose_2d"]

"""Kernels that index views linearly (a linear index on a strided 1-D view follows its stride;
on a non-compact view of more dimensions it is refused)."""

from tenferro_host import kernel as K


@K.kernel
def double(out: K.Array[K.f32], x: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * 2.0


@K.kernel
def flat_copy(out: K.Array[K.f32], m: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = m[i]  # LINEAR


@K.kernel
def accumulate_strided(out: K.Array[K.f32], x: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < x.len:
        K.atomic_add(out, i % 2, x[i])
        out[2 + i] = x[i]

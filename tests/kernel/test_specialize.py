"""The specialization cache: keyed by dtypes+ndims, constants, target and features; bounded."""

from __future__ import annotations

from tenferro_host import dtypes
from tenferro_host import kernel as K


@K.kernel(cache_size=2)
def copy(out: K.Array[K.F], x: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i]


def descs(dtype, ndim=1):
    return [K.ArrayDesc(dtype, ndim)] * 2


def test_hits_misses_and_key_parts():
    copy.cache_clear()
    a = copy.specialize(descs(dtypes.float32), target="cpu")
    assert copy.cache_info() == K.CacheInfo(hits=0, misses=1, maxsize=2, currsize=1)
    assert copy.specialize(descs(dtypes.float32), target="cpu") is a
    assert copy.cache_info().hits == 1
    b = copy.specialize(descs(dtypes.float32), target="cuda", features=("sm_90",))
    assert b is not a and b.target == "cuda" and b.features == ("sm_90",)
    assert copy.specialize(descs(dtypes.float32), target="cuda", features=("sm_90",)) is b
    assert copy.cache_info() == K.CacheInfo(hits=2, misses=2, maxsize=2, currsize=2)


def test_dtype_and_ndim_are_part_of_the_key_and_the_cache_is_bounded():
    copy.cache_clear()
    f32 = copy.specialize(descs(dtypes.float32))
    f64 = copy.specialize(descs(dtypes.float64))
    assert f64.params[0].dtype is dtypes.float64 and f32 is not f64
    two_d = copy.specialize(descs(dtypes.float32, ndim=2))  # evicts the oldest (f32, 1-D)
    assert two_d.params[0].ndim == 2
    assert copy.cache_info().currsize == 2
    assert copy.specialize(descs(dtypes.float32)) is not f32  # recompiled after eviction
    assert copy.cache_info().misses == 4


def test_lru_keeps_recently_used():
    copy.cache_clear()
    f32 = copy.specialize(descs(dtypes.float32))
    copy.specialize(descs(dtypes.float64))
    assert copy.specialize(descs(dtypes.float32)) is f32  # refresh f32
    copy.specialize(descs(dtypes.float16))  # evicts f64, not f32
    assert copy.specialize(descs(dtypes.float32)) is f32


@K.kernel
def twin(out: K.Array[K.F], x: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i]


def test_keys_differ_between_kernels_of_one_signature():
    a = copy.specialize(descs(dtypes.float32), target="cpu")
    b = twin.specialize(descs(dtypes.float32), target="cpu")
    assert a.key != b.key

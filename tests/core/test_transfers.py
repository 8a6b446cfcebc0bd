"""Uploads, downloads, zeros and device copies of views, on every backend (``each_rt``): every
dtype the backend stores round-trips, one it does not store is refused with a typed error, and
canonicalizing a view is one device copy, traced, that moves nothing through the host."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenferro_host as tf

SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
shapes = st.lists(st.integers(0, 9), min_size=0, max_size=3).map(tuple)


def stored(rt: Any) -> list[str]:
    """The dtypes ``rt`` stores, in a fixed order (hypothesis draws an index into it)."""
    return sorted(rt.supported_dtypes)


def sample(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 1000, shape).astype(dtype)


@pytest.mark.parametrize("name", [d.name for d in tf.dtypes.ALL])
def test_upload_download_round_trip_every_dtype(each_rt, name):
    array = (np.random.default_rng(1).standard_normal((3, 4)) * 10).astype(tf.dtype(name).numpy)
    if name not in each_rt.supported_dtypes:
        with pytest.raises(tf.UnsupportedError):
            each_rt.upload(array)
        return
    t = each_rt.upload(array)
    assert t.dtype is tf.dtype(name) and t.storage.domain == each_rt.domain
    assert t.strides == (1, 3) and t.offset == 0 and t.is_compact()
    out = t.download()
    assert out.dtype == array.dtype
    np.testing.assert_array_equal(out, array)


def test_upload_takes_any_numpy_layout(each_rt):
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for array in (base, np.asfortranarray(base), base[::2, ::-1, 1:4], base.transpose(2, 0, 1)):
        np.testing.assert_array_equal(each_rt.upload(array).download(), array)


@SETTINGS
@given(shape=shapes, which=st.integers(0, 8), seed=st.integers(0, 2**16))
def test_upload_download_round_trip(each_rt, shape: tuple[int, ...], which: int, seed: int) -> None:
    dtype = stored(each_rt)[which % len(stored(each_rt))]
    host = sample(np.random.default_rng(seed), dtype, shape)
    t = each_rt.upload(host)
    assert t.dtype.name == dtype and t.shape == shape and t.is_compact()
    assert t.storage.domain == each_rt.domain
    back = t.download()
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back, host)


@SETTINGS
@given(shape=shapes, which=st.integers(0, 8))
def test_zeros(each_rt, shape: tuple[int, ...], which: int) -> None:
    dtype = stored(each_rt)[which % len(stored(each_rt))]
    each_rt.upload(np.ones(max(1, int(np.prod(shape))), dtype))  # dirty memory around
    np.testing.assert_array_equal(each_rt.zeros(dtype, shape).download(), np.zeros(shape, dtype))


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3).map(tuple),
    steps=st.lists(st.sampled_from([1, 2, -1, -2]), min_size=3, max_size=3),
    perm_seed=st.integers(0, 5),
    which=st.integers(0, 8),
)
def test_canonicalize_views_on_the_device(
    each_rt, shape: tuple[int, ...], steps: list[int], perm_seed: int, which: int
) -> None:
    rt = each_rt
    dtype = stored(rt)[which % len(stored(rt))]
    host = sample(np.random.default_rng(perm_seed), dtype, shape)
    t = rt.upload(host)
    key = tuple(slice(None, None, s) for s in steps[: len(shape)])
    perm = tuple(np.random.default_rng(perm_seed).permutation(len(shape)))
    view = t[key].permute(*perm)
    expected = host[key].transpose(perm)
    before = rt.stats()
    out = rt.canonicalize(view)
    after = rt.stats()
    assert out.is_compact() and out.shape == expected.shape
    assert (after["uploads"], after["downloads"]) == (before["uploads"], before["downloads"])
    assert after["d2d_copies"] == before["d2d_copies"] + 1
    assert rt.transfer_trace()[-1].kind == "d2d"
    np.testing.assert_array_equal(out.download(), expected)

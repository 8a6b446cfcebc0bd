"""Layout arithmetic and tensor views against numpy, over generated shapes, strides and offsets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_host as tf
from tenferro_host import layout

HOST = tf.Host()
CPU = HOST.backend("cpu")

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


def offsets_in_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """Storage offset of every element, enumerated column-major (the definition of compact)."""
    if not shape:
        return np.zeros(1, dtype=np.int64)
    idx = np.indices(shape, dtype=np.int64)
    offs = sum(i * s for i, s in zip(idx, strides, strict=True))
    return np.asarray(offs).reshape(-1, order="F")


@st.composite
def shape_and_strides(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape = draw(shapes)
    strides = tuple(draw(st.integers(-12, 12)) for _ in shape)
    return shape, strides


@given(shape_and_strides())
def test_is_compact_means_column_major_enumeration_of_0_to_n(case):
    shape, strides = case
    enumeration = offsets_in_order(shape, strides)
    expected = bool(np.array_equal(enumeration, np.arange(layout.numel(shape))))
    assert layout.is_compact(shape, strides) == expected


@given(shapes)
def test_compact_strides_are_compact(shape):
    assert layout.is_compact(shape, layout.compact_strides(shape))


@given(shape_and_strides(), st.integers(0, 50))
def test_span_is_min_and_max_offset(case, offset):
    shape, strides = case
    lo, hi = layout.span(shape, strides, offset)
    if layout.numel(shape) == 0:
        assert (lo, hi) == (offset, offset)
    else:
        offs = offsets_in_order(shape, strides) + offset
        assert (lo, hi) == (offs.min(), offs.max() + 1)


def test_size_one_dimensions_are_ignored_and_empty_is_compact():
    assert layout.is_compact((1, 5), (99, 1))
    assert layout.is_compact((5, 1), (1, -3))
    assert layout.is_compact((0, 3), (7, 7))
    assert not layout.is_compact((2, 3), (3, 1))


@st.composite
def view_case(draw: st.DrawFn):
    shape = draw(st.lists(st.integers(0, 5), min_size=1, max_size=4).map(tuple))
    perm = tuple(draw(st.permutations(range(len(shape)))))
    key = []
    for _dim in shape:
        kind = draw(st.sampled_from(["all", "slice", "int"]))
        if kind == "all":
            key.append(slice(None))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-6, 6))
            stop = draw(st.none() | st.integers(-6, 6))
            step = draw(st.none() | st.integers(-3, 3).filter(lambda s: s != 0))
            key.append(slice(start, stop, step))
        else:
            key.append("int")
    return shape, perm, key, draw(st.integers(0, 2**31))


@settings(max_examples=150, deadline=None)
@given(view_case())
def test_permute_then_slice_matches_numpy(case):
    shape, perm, key, seed = case
    array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    t = CPU.upload(array).permute(*perm)
    ref = np.transpose(array, perm)
    concrete = []
    for k, dim in zip(key, ref.shape, strict=True):
        if k == "int":
            # negative indices too
            k = slice(None) if dim == 0 else seed % dim - (dim if seed % 2 else 0)
        concrete.append(k)
    view, expected = t[tuple(concrete)], ref[tuple(concrete)]
    assert view.shape == expected.shape
    assert view.storage is t.storage
    np.testing.assert_array_equal(view.download(), expected)
    assert view.is_compact() == layout.is_compact(view.shape, view.strides)
    lo, hi = view.span()
    if view.numel:
        assert 0 <= lo < hi <= t.storage.nbytes // 4
    canon = CPU.canonicalize(view)
    assert canon.is_compact() and canon.offset == 0 and canon.storage is not t.storage
    np.testing.assert_array_equal(canon.download(), expected)


@given(st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple))
def test_transpose_reverses_axes_like_numpy(shape):
    array = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    t = CPU.upload(array)
    np.testing.assert_array_equal(t.transpose().download(), array.transpose())
    np.testing.assert_array_equal(t.T.download(), array.T)


def test_ellipsis_and_integer_indexing_drop_dimensions():
    array = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    t = CPU.upload(array)
    np.testing.assert_array_equal(t[..., 1].download(), array[..., 1])
    np.testing.assert_array_equal(t[1, ...].download(), array[1, ...])
    np.testing.assert_array_equal(t[np.int64(-1), 2].download(), array[-1, 2])
    assert t[1, 2, 3].shape == () and t[1, 2, 3].download() == array[1, 2, 3]
    np.testing.assert_array_equal(t[...].download(), array)
    assert t.permute((2, 0, 1)).shape == (4, 2, 3)

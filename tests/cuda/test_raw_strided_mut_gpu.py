"""``rs.tensor_strided_mut(t)``: an exclusive borrow of any view, pointer to storage element 0,
layout in the ref — a kernel writes a non-compact view through offset and strides."""

from __future__ import annotations

import numpy as np
import pytest
from support.cuda_support import cuda_runtime, raw_session

import tenferro_host as tf
from tenferro_host.cuda import raw

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

# Scatter a compact (n0 x n1) source into a strided view given by base pointer, offset, strides.
SCATTER_SRC = r"""
extern "C" __global__ void scatter2d(float* base, long long offset, long long s0, long long s1,
                                     const float* src, int n0, int n1) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n0 * n1) {
        int r = i % n0, c = i / n0;
        base[offset + r * s0 + c * s1] = src[i];
    }
}
"""


def test_a_kernel_writes_a_non_compact_view() -> None:
    rt = cuda_runtime()
    x = np.zeros((5, 7), np.float32)
    t = rt.upload(x)
    view = t[1:4, ::2].T  # shape (4, 3), non-compact, offset 1
    src = np.arange(12, dtype=np.float32).reshape(4, 3)
    s = rt.upload(src)
    with raw_session(rt) as (_, rs):
        ref = rs.tensor_strided_mut(view)
        assert (ref.offset, ref.shape, ref.strides) == (view.offset, view.shape, view.strides)
        assert ref.readonly is False
        assert ref.__cuda_array_interface__["data"][1] is False
        fn = rs.compile_nvrtc(SCATTER_SRC).function("scatter2d")
        n0, n1 = view.shape
        rs.launch(
            fn,
            raw.LaunchConfig.flat(n0 * n1, 64),
            [
                ref,
                raw.i64(ref.offset),
                raw.i64(ref.strides[0]),
                raw.i64(ref.strides[1]),
                rs.tensor(s),
                raw.i32(n0),
                raw.i32(n1),
            ],
        )
    expected = x.copy()
    expected[1:4, ::2] = src.T
    np.testing.assert_array_equal(t.download(), expected)


def test_it_is_exclusive_over_the_whole_storage() -> None:
    rt = cuda_runtime()
    t = rt.upload(np.zeros((4, 4), np.float32))
    with raw_session(rt) as (_, rs):
        writer = rs.tensor_strided_mut(t.T)
        with pytest.raises(tf.AliasingError):
            rs.tensor_strided(t[2:])
        with pytest.raises(tf.AliasingError):
            rs.tensor_strided_mut(t[:, 1])
        del writer  # the borrow ends with the ref
        reader = rs.tensor_strided(t)
        with pytest.raises(tf.AliasingError):
            rs.tensor_strided_mut(t.T)
        assert reader.readonly is True

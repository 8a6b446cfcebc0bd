"""Empty tensors (a zero in the shape) are valid everywhere, on every backend (``each_rt``): no
allocation, nothing moved."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf

EMPTY_SHAPES = [(0,), (3, 0), (0, 0, 2), (2, 0, 5)]


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_create_transfer_and_canonicalize(each_rt, shape):
    rt = each_rt
    for t in (
        rt.empty("float32", shape),
        rt.zeros("int32", shape),
        rt.upload(np.zeros(shape, np.uint32)),
    ):
        assert t.shape == shape and t.numel == 0 and t.nbytes == 0
        assert t.storage.nbytes == 0 and t.is_compact()
        out = t.download()
        assert out.shape == shape and out.dtype == t.dtype.numpy
        c = rt.canonicalize(t)
        assert c.shape == shape and c.storage.nbytes == 0
        assert t.transpose().download().shape == shape[::-1]
    assert rt.stats()["uploads"] == 0 and rt.stats()["downloads"] == 0
    assert rt.stats()["d2d_copies"] == 0
    assert rt.transfer_trace() == []


def test_views_that_become_empty(each_rt):
    rt = each_rt
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rt.upload(array)
    copies = rt.stats()["d2d_copies"]
    keys = [(slice(2, 2),), (slice(None), slice(4, None)), (slice(None, None, -1), slice(3, 1))]
    for key in keys:
        view = t[key]
        assert view.numel == 0
        assert view.download().shape == array[key].shape
        assert view.span()[0] == view.span()[1]
        assert rt.canonicalize(view).shape == array[key].shape
    assert rt.stats()["d2d_copies"] == copies  # canonicalizing an empty view moves nothing


def test_op_on_empty_tensors(each_rt):
    a = each_rt.empty("float32", (0, 4))
    out = each_rt.host.run("ext_add_kernel.add", a, a)
    assert out.shape == (0, 4) and out.storage.nbytes == 0


def test_scalar_tensor_is_not_empty(each_rt):
    t = each_rt.upload(np.float32(2.5))
    assert t.shape == () and t.numel == 1 and t.download() == np.float32(2.5)


def test_dlpack_of_empty(host):
    cpu = host.backend("cpu")
    t = cpu.from_dlpack(np.zeros((0, 3), np.float32))
    assert t.shape == (0, 3) and t.download().shape == (0, 3)
    assert np.from_dlpack(cpu.empty(tf.float32, (0,))).shape == (0,)

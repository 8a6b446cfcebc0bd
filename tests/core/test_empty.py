"""Empty tensors (a zero in the shape) are valid everywhere: no allocation, nothing moved."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf

EMPTY_SHAPES = [(0,), (3, 0), (0, 0, 2), (2, 0, 5)]


@pytest.fixture
def cpu(host):
    return host.new_backend("cpu")


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_create_transfer_and_canonicalize(cpu, shape):
    for t in (
        cpu.empty("float32", shape),
        cpu.zeros("int64", shape),
        cpu.upload(np.zeros(shape, np.float64)),
    ):
        assert t.shape == shape and t.numel == 0 and t.nbytes == 0
        assert t.storage.nbytes == 0 and t.is_compact()
        out = t.download()
        assert out.shape == shape and out.dtype == t.dtype.numpy
        c = cpu.canonicalize(t)
        assert c.shape == shape and c.storage.nbytes == 0
        assert t.transpose().download().shape == shape[::-1]
    assert cpu.stats()["uploads"] == 0 and cpu.stats()["downloads"] == 0
    assert cpu.stats()["d2d_copies"] == 0
    assert cpu.transfer_trace() == []


def test_views_that_become_empty(cpu):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = cpu.upload(array)
    keys = [(slice(2, 2),), (slice(None), slice(4, None)), (slice(None, None, -1), slice(3, 1))]
    for key in keys:
        view = t[key]
        assert view.numel == 0
        assert view.download().shape == array[key].shape
        assert view.span()[0] == view.span()[1]
        assert cpu.canonicalize(view).shape == array[key].shape


def test_op_on_empty_tensors(host, cpu):
    a = cpu.empty("float32", (0, 4))
    out = host.run("ext_add_kernel.add", a, a)
    assert out.shape == (0, 4) and out.storage.nbytes == 0


def test_scalar_tensor_is_not_empty(cpu):
    t = cpu.upload(np.float32(2.5))
    assert t.shape == () and t.numel == 1 and t.download() == np.float32(2.5)


def test_dlpack_of_empty(cpu):
    t = cpu.from_dlpack(np.zeros((0, 3), np.float32))
    assert t.shape == (0, 3) and t.download().shape == (0, 3)
    assert np.from_dlpack(cpu.empty(tf.float32, (0,))).shape == (0,)

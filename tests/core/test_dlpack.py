"""CPU DLPack interop with numpy: zero-copy where the layout allows."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.cpu import CpuRuntime


@pytest.fixture
def cpu(host):
    return host.backend("cpu")


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,
        np.asfortranarray,
        lambda a: a[1:, ::2],
        lambda a: a.T,
        lambda a: a.reshape(-1),
        lambda a: a[1:2, 1:],
    ],
    ids=["c-order", "f-order", "sliced", "transposed", "1-d", "one-row"],
)
def test_from_dlpack_shares_memory_when_strides_are_positive(cpu, make):
    array = make(np.arange(24, dtype=np.float32).reshape(4, 6))
    t = cpu.from_dlpack(array)
    assert t.storage.kind == "imported" and t.storage.domain == cpu.domain
    assert np.shares_memory(CpuRuntime.strided_view(t), array)
    np.testing.assert_array_equal(t.download(), array)
    array[...] = -1  # the tensor sees the producer's writes: one buffer
    assert (t.download() == -1).all()


@pytest.mark.parametrize("shape", [(6,), (2, 3)])
def test_from_dlpack_of_a_read_only_array_is_read_only(cpu, shape):
    array = np.ones(shape, np.float32)
    array.flags.writeable = False
    assert cpu.from_dlpack(array).storage.read_only
    assert not cpu.from_dlpack(np.ones(shape, np.float32)).storage.read_only


def test_from_dlpack_copies_negative_strides(cpu):
    array = np.arange(10, dtype=np.int64)[::-1]
    t = cpu.from_dlpack(array)
    assert not np.shares_memory(CpuRuntime.strided_view(t), array)
    assert t.is_compact() and t.storage.kind == "imported"
    np.testing.assert_array_equal(t.download(), array)


def test_imported_tensor_runs_ops(host, cpu):
    a = cpu.from_dlpack(np.ones((2, 3), np.float32))
    assert host.run("ext_add_kernel.add", a, a).download().sum() == 12.0


def test_from_dlpack_of_an_unsupported_dtype(cpu):
    with pytest.raises(tf.DTypeError):
        cpu.from_dlpack(np.zeros(3, np.int8))


def test_export_is_zero_copy_for_views(cpu):
    t = cpu.upload(np.arange(12, dtype=np.float64).reshape(3, 4))
    assert t.__dlpack_device__() == (1, 0)
    for view in (t, t.T, t[1:, ::2]):
        exported = np.from_dlpack(view)
        np.testing.assert_array_equal(exported, view.download())
        assert np.shares_memory(exported, CpuRuntime.strided_view(t))

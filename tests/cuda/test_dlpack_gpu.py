"""CUDA DLPack interop with CuPy and torch: zero-copy, ordered by events, deleters run."""

from __future__ import annotations

import gc
import importlib.util

import numpy as np
import pytest
from support.cuda_support import ADD_SRC, cuda_runtime, raw_session
from support.read_only_dlpack import ReadOnlyFloat32

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.cuda import raw

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def rt():
    return cuda_runtime()


def _torch():
    """torch, or skip when it is not installed; an installed torch that fails to import fails.

    (Its import once failed here because an NVRTC compile had corrupted the interpreter.)
    """
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    import torch

    return torch


def _exports_alive() -> int:
    from tenferro_host_cuda import _dlpack as dlpack

    return len(dlpack._exports)


def test_import_from_cupy_and_launch(rt):
    cupy = pytest.importorskip("cupy")
    src = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)  # row-major
    t = rt.from_dlpack(src)
    assert t.storage.kind == "imported" and t.storage.domain == rt.domain
    assert t.shape == (3, 4) and t.strides == (4, 1) and not t.is_compact()
    np.testing.assert_array_equal(t.download(), cupy.asnumpy(src))
    col = t.T  # column-major view of the same memory: compact
    with raw_session(rt) as (_, rs):
        out = rs.alloc_output(tf.float32, col.shape)
        rs.launch(
            rs.compile_nvrtc(ADD_SRC).function("add_kernel"),
            raw.LaunchConfig.flat(12),
            [rs.tensor_mut(out), rs.tensor(col), rs.tensor(col), raw.i32(12)],
        )
    np.testing.assert_array_equal(out.download(), 2 * cupy.asnumpy(src).T)
    released = rt.stats()["leases_released"]
    del t, col, src
    gc.collect()
    rt.synchronize()  # drains the deferred deleter into the retirement queue and polls it
    assert rt.stats()["leases_released"] > released and rt.deferred_errors == 0
    view = rt.from_dlpack(cupy.arange(20, dtype=cupy.int64)[4::3])  # strided, offset
    np.testing.assert_array_equal(view.download(), np.arange(20)[4::3])


def test_import_from_torch_and_errors(rt):
    torch = _torch()
    x = torch.arange(6, dtype=torch.float64, device=f"cuda:{rt.index}").reshape(2, 3)
    t = rt.from_dlpack(x)
    np.testing.assert_array_equal(t.download(), x.cpu().numpy())
    with pytest.raises(tf.ForeignRuntimeError, match="upload"):
        rt.from_dlpack(np.ones(3))
    with pytest.raises(tf.ValidationError):
        rt.from_dlpack([1, 2, 3])
    with pytest.raises(tf.DTypeError):
        rt.from_dlpack(torch.ones(2, dtype=torch.int8, device=f"cuda:{rt.index}"))


def test_export_to_cupy_and_torch(rt):
    cupy = pytest.importorskip("cupy")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rt.upload(x)
    syncs = rt.stats()["synchronizations"]
    before = _exports_alive()
    c = cupy.from_dlpack(t)
    assert c.shape == (3, 4) and c.flags.f_contiguous
    np.testing.assert_array_equal(cupy.asnumpy(c), x)
    np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(t.T[1:])), x.T[1:])
    assert rt.stats()["synchronizations"] == syncs  # ordered by events, not waits
    del c
    gc.collect()
    assert _exports_alive() == before
    assert t.__dlpack_device__() == (2, rt.index)
    torch = _torch()
    np.testing.assert_array_equal(torch.from_dlpack(t).cpu().numpy(), x)


def test_unconsumed_capsule_and_export_options(rt):
    t = rt.upload(np.ones(3, np.float32))
    before = _exports_alive()
    capsule = t.__dlpack__(stream=-1)
    assert _exports_alive() == before + 1
    del capsule
    gc.collect()
    assert _exports_alive() == before
    with pytest.raises(BufferError):
        t.__dlpack__(stream=None, copy=True)
    with pytest.raises(tf.ValidationError):
        t.__dlpack__(stream="default")
    for bad in (0, 5, 4095, -2, 1 << 64):  # 0 is disallowed by DLPack; the rest are no handle
        with pytest.raises(tf.ValidationError, match="DLPack disallows 0") as info:
            t.__dlpack__(stream=bad)
        assert info.value.argument == "stream"
    assert _exports_alive() == before  # a refused export keeps nothing alive


def test_round_trip_and_malformed_producer(rt):
    from tenferro_host.provider import DLManagedTensor, capsule_pointer

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    t = rt.upload(x)
    back = rt.from_dlpack(t)  # our own export, imported again
    assert back.storage.kind == "imported" and back.strides == t.strides
    np.testing.assert_array_equal(back.download(), x)

    class Malformed:
        """Claims a billion elements over a buffer of eight."""

        def __dlpack_device__(self):
            return (2, rt.index)

        def __dlpack__(self, stream=None):
            capsule = t.__dlpack__(stream=stream)
            address = capsule_pointer(capsule, b"dltensor")
            DLManagedTensor.from_address(address).dl_tensor.shape[0] = 10**9
            return capsule

    before = _exports_alive()
    with pytest.raises(tf.ValidationError, match="outside its allocation"):
        rt.from_dlpack(Malformed())
    gc.collect()
    assert _exports_alive() == before  # the producer's deleter ran


@K.kernel
def plus_one(out: K.Array[K.f32], x: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] + 1.0


def test_a_read_only_import_is_read_but_never_written(rt):
    """CuPy cannot make a read-only array: a DLPack 1.0 capsule flagged READ_ONLY lends one."""
    cupy = pytest.importorskip("cupy")
    src = cupy.arange(4, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()  # this producer orders nothing: finish the fill first
    producer = ReadOnlyFloat32(src.data.ptr, 4, device=rt.index)
    t = rt.from_dlpack(producer)
    assert t.storage.read_only and producer.asked == [(1, 0)]
    with raw_session(rt) as (_, rs):
        with pytest.raises(tf.ValidationError, match="borrows it for writing, but that tensor"):
            rs.tensor_mut(t)
        with pytest.raises(tf.ValidationError, match="borrows it for writing, but that tensor"):
            rs.tensor_strided_mut(t)
        out = rs.alloc_output(tf.float32, (4,))
        rs.launch(
            rs.compile_nvrtc(ADD_SRC).function("add_kernel"),
            raw.LaunchConfig.flat(4),
            [rs.tensor_mut(out), rs.tensor(t), rs.tensor(t), raw.i32(4)],
        )
    assert out.download().tolist() == [0.0, 2.0, 4.0, 6.0]
    with rt.session() as s, tf.cuda.exec_session(s).jit("tests.read_only") as js:
        with pytest.raises(tf.ValidationError, match="writes 'out', but that tensor is read-only"):
            js.launch(plus_one, 1, 4, t, out)
        js.launch(plus_one, 1, 4, out, t)
    assert out.download().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert cupy.asnumpy(src).tolist() == [0.0, 1.0, 2.0, 3.0]  # never written
    del t
    gc.collect()
    rt.synchronize()
    assert producer.deleted == 1 and rt.deferred_errors == 0


def test_real_producers_import_writable_whichever_dlpack_version_they_speak(rt):
    cupy = pytest.importorskip("cupy")
    torch = _torch()
    for x in (cupy.ones(3, dtype=cupy.float32), torch.ones(3, device=f"cuda:{rt.index}")):
        t = rt.from_dlpack(x)
        assert not t.storage.read_only
        with raw_session(rt) as (_, rs):
            rs.tensor_mut(t)  # writable: the producer did not flag it READ_ONLY

"""A read-only DLPack import on CUDA, against the simulated driver (no GPU needed; runs in CI):
the READ_ONLY flag reaches the storage, and every write path refuses it before any launch."""

from __future__ import annotations

import gc

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

from support.read_only_dlpack import ReadOnlyFloat32

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.errors import ValidationError


@K.kernel
def fill(out: K.Array[K.f32], x: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] + 1.0


@pytest.fixture
def rt(install):
    install(1)
    runtime = install.make(0, tf.Host())
    yield runtime
    runtime.close()  # drops the raw sessions' cuda.core stream wrapper, a reference cycle:
    gc.collect()  # collected here, not in a later test that counts garbage


def _import(rt, read_only=True):
    owner = rt.upload(np.arange(4, dtype=np.float32))
    producer = ReadOnlyFloat32(owner.storage.ptr, 4, read_only=read_only)
    return owner, producer, rt.from_dlpack(producer)


def test_the_read_only_flag_reaches_the_storage_and_the_deleter_still_runs(rt):
    _owner, producer, t = _import(rt)
    assert producer.asked == [(1, 0)]  # DLPack 1.0 was asked for
    assert t.storage.kind == "imported" and t.storage.read_only
    assert t.download().tolist() == [0.0, 1.0, 2.0, 3.0]  # reading is fine
    with pytest.raises(BufferError, match="read-only import"):
        t.__dlpack__(stream=-1)  # an exported capsule would lend it writable
    _, writable_producer, w = _import(rt, read_only=False)
    assert not w.storage.read_only
    del t, w
    gc.collect()
    rt.synchronize()
    assert producer.deleted == 1 and writable_producer.deleted == 1 and rt.deferred_errors == 0


def test_raw_write_borrows_of_a_read_only_import_are_refused(rt):
    _, _, t = _import(rt)
    with rt.session() as s, tf.cuda.exec_session(s).raw("tests.ro") as rs:
        for borrow in (rs.tensor_mut, rs.tensor_strided_mut):
            with pytest.raises(
                ValidationError, match="borrows it for writing, but that tensor is read-only"
            ) as info:
                borrow(t)
            assert info.value.argument == "t"
        rs.tensor(t)  # a shared borrow is what a read-only import allows
        rs.tensor_strided(t)


def test_a_dsl_kernel_writing_a_read_only_import_is_refused_on_cuda(rt):
    _, _, t = _import(rt)
    out = rt.zeros("float32", 4)
    with rt.session() as s, tf.cuda.exec_session(s).jit("tests.ro") as js:
        with pytest.raises(ValidationError, match="writes 'out', but that tensor is read-only"):
            js.launch(fill, 1, 4, t, out)

"""PointerBuffer, the DLPack producer of a framework's bare pointer: its capsule is imported
zero-copy, and one never consumed gives its structs back when it dies."""

from __future__ import annotations

import gc

import numpy as np

import tenferro_host as tf
from tenferro_host.interop import _pointer_dlpack
from tenferro_host.interop._pointer_dlpack import PointerBuffer
from tenferro_host.provider import KDL_CPU


def test_a_pointer_is_imported_without_a_copy_and_read_only_as_lent() -> None:
    cpu = tf.Host().backend("cpu")
    x = np.arange(6, dtype=np.float32).reshape(3, 2, order="F")
    ptr = x.ctypes.data
    t = cpu.from_dlpack(PointerBuffer(ptr, tf.float32, (3, 2), (KDL_CPU, 0), read_only=True))
    np.testing.assert_array_equal(t.download(), x)
    assert t.storage.read_only
    x[0, 0] = 7.0  # the same memory
    assert t.download()[0, 0] == 7.0


def test_a_capsule_never_consumed_releases_its_structs() -> None:
    x = np.zeros(4, np.int32)
    before = len(_pointer_dlpack._LIVE)
    buffer = PointerBuffer(x.ctypes.data, tf.int32, (4,), (KDL_CPU, 0), read_only=False)
    capsule = buffer.__dlpack__(max_version=(1, 0))
    assert len(_pointer_dlpack._LIVE) == before + 1
    del capsule
    gc.collect()
    assert len(_pointer_dlpack._LIVE) == before

"""CUDA DLPack export and import against the simulated driver (no GPU needed; runs in CI).

The capsules are made and read through the host's own prototypes of the capsule C API
(``tenferro_host.provider``): ``ctypes.pythonapi.PyCapsule_New`` is one object per process,
and ``jax.ffi.pycapsule`` (the JAX bridge calls it) retypes its destructor argument.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

import tenferro_host as tf


@pytest.fixture
def rt(install):
    install(1)
    runtime = install.make(0, tf.Host())
    yield runtime
    runtime.close()
    gc.collect()


@pytest.fixture
def retyped_pythonapi():
    """``ctypes.pythonapi.PyCapsule_New`` typed as ``jax.ffi.pycapsule`` leaves it."""
    builder = ctypes.pythonapi.PyCapsule_New
    saved = builder.restype, builder.argtypes
    builder.restype = ctypes.py_object
    builder.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.CFUNCTYPE(None, ctypes.py_object))
    yield
    builder.restype, builder.argtypes = saved


def _exports_alive() -> int:
    from tenferro_host_cuda import _dlpack

    return len(_dlpack._exports)


def test_export_and_import_whatever_another_library_set_on_pythonapi(rt, retyped_pythonapi):
    t = rt.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
    back = rt.from_dlpack(t)  # our own export (stream-ordered), imported again
    assert back.storage.kind == "imported" and back.strides == t.strides
    np.testing.assert_array_equal(back.download(), t.download())
    before = _exports_alive()
    capsule = t.__dlpack__(stream=-1)  # never consumed: its destructor releases the export
    assert _exports_alive() == before + 1
    del capsule
    gc.collect()
    assert _exports_alive() == before
    del back
    gc.collect()
    rt.synchronize()
    assert rt.deferred_errors == 0

"""ext_add_kernel's own tests, written with the tenferro-host kit (what an op author writes)."""

from __future__ import annotations

import numpy as np

import tenferro_host as tf
from tenferro_host.testing import check_op, conformance_test

# Every variant on every backend it claims, plus NVRTC, DSL compile and raw launch checks.
test_conformance = conformance_test("ext_add_kernel.add")


def test_add_on_each_backend(host: tf.Host, backend_name: str) -> None:
    for dtype in ("float32", "int32"):
        check_op(host, "ext_add_kernel.add", backend_name, shape=(3, 1000), dtype=dtype)


def test_add_of_views(host: tf.Host, backend: tf.Backend) -> None:
    a = backend.upload(np.arange(12, dtype=np.float32).reshape(3, 4))
    out = host.run("ext_add_kernel.add", a.T, a.T)
    np.testing.assert_array_equal(out.download(), 2 * np.arange(12).reshape(3, 4).T)

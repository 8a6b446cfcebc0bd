"""The example op package, tested the way its authors would: with the test kit."""

from __future__ import annotations

import numpy as np
import pytest
from ext_add_kernel import DTYPES
from ext_add_kernel.plugin import ADD, VARIANTS

import tenferro_host as tf
from tenferro_host.testing import check_op

OP = "ext_add_kernel.add"


@pytest.fixture
def op_backend(host, backend_name):
    """The kit's backend cases, skipping backends this op has no variant for (yet)."""
    if backend_name not in host.variants_by_backend(OP):
        pytest.skip(f"{OP} has no variant for {backend_name}: {sorted(VARIANTS)}")
    return backend_name


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference_on_every_backend(host, op_backend, dtype):
    if dtype not in host.backend(op_backend).supported_dtypes:
        pytest.skip(f"backend {op_backend} does not store {dtype}")
    check_op(host, OP, op_backend, shape=(257, 3), dtype=dtype)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (1000,), (7, 0, 2), (4, 5, 6)])
def test_matches_reference_for_shapes(host, op_backend, shape):
    check_op(host, OP, op_backend, shape=shape)


def test_registered_by_its_distribution(host):
    rec = host.registry.op(OP)
    assert (rec.dist, rec.status, rec.spec) == ("ext-add-kernel", "ok", ADD)
    assert host.variants_by_backend(OP)["cpu"] == "cpu"
    assert "cpu" in VARIANTS


def test_cpu_variant_takes_views_and_returns_a_compact_tensor(host):
    cpu = host.backend("cpu")
    array = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = cpu.upload(array)
    out = host.run(OP, t.T, t[::-1].T)
    assert out.is_compact() and out.storage is not t.storage
    assert out.storage.domain == cpu.domain
    np.testing.assert_array_equal(out.download(), array.T + array[::-1].T)


def test_dtype_and_shape_errors(host):
    cpu = host.backend("cpu")
    f32, f64 = cpu.zeros("float32", (3,)), cpu.zeros("float64", (3,))
    with pytest.raises(tf.DTypeError, match="lhs is float32 but rhs is float64") as info:
        host.run(OP, f32, f64)
    assert (info.value.argument, info.value.op) == ("rhs", OP)
    with pytest.raises(tf.ShapeError, match="same shape") as info:
        host.run(OP, f32, cpu.zeros("float32", (3, 1)))
    assert info.value.argument == "rhs"
    flags = cpu.zeros("bool", (3,))
    with pytest.raises(tf.DTypeError, match="bool is not supported") as info:
        host.run(OP, flags, flags)
    assert info.value.argument == "lhs"

"""The test kit itself: check_op catches a wrong variant; backend cases carry their marks."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.provider._registry import BackendStatus
from tenferro_host.testing import check_op, compare_outputs, random_inputs
from tenferro_host.testing.pytest_plugin import backend_param, backend_params


def register(host, name, variant, dtypes=("float32",)):
    view = host.registry.staging("test-kit")
    view.add_op(
        tf.OpSpec(
            name=name,
            signature=tf.Signature(inputs=("x",), dtypes=dtypes),
            reference=lambda x: x * 2,
            variants={"cpu": variant},
        )
    )
    view.commit()


def test_check_op_raises_on_a_wrong_variant(host):
    register(host, "kit.double", lambda ex, x: ex.runtime.upload(x.download() * 3))
    with pytest.raises(AssertionError, match=r"kit\.double on cpu:0 \(float32, shape \(5,\)\)"):
        check_op(host, "kit.double", "cpu", shape=5)


def test_check_op_passes_and_returns_outputs(host):
    register(host, "kit.double", lambda ex, x: ex.runtime.upload(x.download() * 2))
    (out,) = check_op(host, "kit.double", "cpu", shape=(2, 2), seed=3)
    np.testing.assert_array_equal(
        out,
        random_inputs(host.registry.op("kit.double").spec.signature, (2, 2), tf.float32, 3)[0] * 2,
    )


def test_check_op_rejects_a_dtype_the_op_does_not_take(host):
    register(host, "kit.double", lambda ex, x: x)
    with pytest.raises(tf.DTypeError, match="does not accept float64; use one of float32"):
        check_op(host, "kit.double", "cpu", dtype="float64")


def test_compare_outputs_explains_shape_count_and_tolerance():
    assert "returned 2 outputs" in compare_outputs([np.zeros(1)] * 2, [np.zeros(1)], ("out",))
    assert "has shape (2,)" in compare_outputs([np.zeros(2)], [np.zeros(3)], ("out",))
    ok = np.float32(1) + np.float32(1e-6)
    assert compare_outputs([np.array([ok])], [np.array([1.0], np.float32)], ("out",)) is None
    assert compare_outputs([np.array([1], np.int32)], [np.array([2], np.int32)], ("o",))
    assert compare_outputs([np.array([np.nan])], [np.array([np.nan])], ("out",)) is None


def test_random_inputs_cover_every_dtype():
    sig = tf.Signature(inputs=("a", "b"))
    for dt in tf.dtypes.ALL:
        a, b = random_inputs(sig, (3, 2), dt, seed=1)
        assert a.dtype == dt.numpy and a.shape == (3, 2)
        if dt.category != "bool":
            assert not np.array_equal(a, b)


def _marks(param):
    return sorted(m.name for m in param.marks)


def test_backend_param_marks():
    cuda_missing = backend_param(BackendStatus("cuda", False, "no driver"))
    assert _marks(cuda_missing) == ["cuda", "gpu", "skip"]
    assert "no driver" in cuda_missing.marks[-1].kwargs["reason"]
    soft = backend_param(BackendStatus("webgpu", True, software=True, devices=[{}]))
    assert _marks(soft) == ["webgpu"]
    hard = backend_param(BackendStatus("webgpu", True, devices=[{}]))
    assert _marks(hard) == ["gpu", "webgpu"]
    assert _marks(backend_param(BackendStatus("cpu", True, devices=[{}]))) == []


def test_backend_params_cpu_first_and_gpu_kinds_always_listed(host):
    params = backend_params(host)
    ids = [p.id for p in params]
    assert ids[0] == "cpu" and {"cuda", "webgpu"} <= set(ids)
    assert "rocm" not in ids  # unavailable and not a GPU kind the kit lists

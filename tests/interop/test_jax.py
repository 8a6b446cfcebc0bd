"""The JAX bridge on the CPU platform: eager, jit, vmap, results in XLA's buffers, errors."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.provider import _op_plan
from tenferro_host.provider._compiled import COMPILED

jax = pytest.importorskip("jax", reason="JAX is not installed (scripts/setup installs it)")
jnp = jax.numpy

from tenferro_host.interop import jax as tf_jax  # noqa: E402


@pytest.fixture(autouse=True)
def _on_the_cpu_platform():
    """These tests are of the CPU path: on a GPU machine JAX would place arrays on the GPU,
    where the test ops (cpu variants only) rightly raise UnsupportedError."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def test_eager_jit_and_vmap(bridge_host: tf.Host) -> None:
    add = tf_jax.export("ext_add_kernel.add")
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    want = np.asarray(x) * 2
    np.testing.assert_array_equal(add(x, x), want)
    np.testing.assert_array_equal(jax.jit(add)(x, x), want)
    np.testing.assert_array_equal(jax.vmap(add)(x, x), want)
    np.testing.assert_array_equal(jax.jit(jax.vmap(add, in_axes=(1, 1)))(x, x), want.T)


def test_a_planned_call_writes_each_calls_result_buffer(bridge_host: tf.Host) -> None:
    add = jax.jit(tf_jax.export("ext_add_kernel.add"))
    # the bridges' host is the worker's: plans of another test's (3, 5) calls are not this one's
    bridge_host.op("ext_add_kernel.add").forget_plans()
    for k in range(4):  # the full path twice, then the op handle's replay into XLA's buffer
        x = jnp.full((3, 5), float(k), jnp.float32)
        np.testing.assert_array_equal(add(x, x), np.full((3, 5), 2.0 * k, np.float32))
    if _op_plan.ENABLED:  # TENFERRO_OP_PLAN=0: the full path on every call
        states = bridge_host.op("ext_add_kernel.add").plans()  # call key -> its state
        assert [s for key, s in states.items() if "float32[3, 5]" in key] == ["replay"], states


def test_several_outputs_and_attributes(bridge_host: tf.Host) -> None:
    a = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    u, s, vh = jax.jit(tf_jax.export("linalg.svd"))(jnp.asarray(a))
    np.testing.assert_allclose(np.asarray(u) * np.asarray(s) @ np.asarray(vh), a, atol=1e-5)
    summed = tf_jax.export("linalg.sum")(jnp.asarray(a), axis=(1,))
    np.testing.assert_allclose(summed, a.sum(1), rtol=1e-5)


def test_results_the_variant_did_not_write_in_place_are_copied(bridge_host: tf.Host) -> None:
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    np.testing.assert_array_equal(jax.jit(tf_jax.export("tfx.transpose"))(x), np.asarray(x).T)


def test_an_op_error_reaches_the_caller_with_its_message(bridge_host: tf.Host) -> None:
    with pytest.raises(Exception, match="read-only"):  # XLA's inputs are imported read-only
        jax.block_until_ready(tf_jax.export("tfx.passthrough")(jnp.ones(2)))
    add = tf_jax.export("ext_add_kernel.add")
    with pytest.raises(Exception, match=r"ShapeError: \[ext_add_kernel.add\].*same shape"):
        jax.block_until_ready(add(jnp.ones(2), jnp.ones((2, 1))))
    with pytest.raises(tf.ValidationError, match="no attributes"):
        tf_jax.export("tfx.scale")(jnp.ones(2), factr=1.0)
    with pytest.raises(tf.ValidationError, match="takes 1 arrays"):
        tf_jax.export("tfx.scale")(jnp.ones(2), jnp.ones(2))


def test_a_call_frame_the_handler_cannot_read_is_xlas_error_not_a_crash(
    bridge_host: tf.Host,
) -> None:
    """A call of the target made by hand (``jax.ffi.ffi_call``): an attribute that is not a
    string, and, for the compiled handler (which finds the op's body by the call's ``target``
    attribute), a call without ``target``, are XLA errors naming what was wrong."""
    add = tf_jax.export("ext_add_kernel.add")
    x = jnp.ones(4, jnp.float32)
    result = jax.ShapeDtypeStruct((4,), jnp.float32)
    by_hand = jax.ffi.ffi_call(add.target, result)
    with pytest.raises(Exception, match="'count' is not a string"):
        jax.block_until_ready(by_hand(x, x, attrs="{}", target=add.target, count=3))
    if COMPILED is None:  # the ctypes handler is the target's own: no attribute names it
        np.testing.assert_array_equal(np.asarray(by_hand(x, x, attrs="{}")), np.full(4, 2.0))
    else:
        with pytest.raises(Exception, match="no string attribute 'target'"):
            jax.block_until_ready(by_hand(x, x, attrs="{}"))
        with pytest.raises(Exception, match="no tenferro_host FFI body for target 'elsewhere'"):
            jax.block_until_ready(by_hand(x, x, attrs="{}", target="elsewhere"))


def test_export_arguments_are_checked(bridge_host: tf.Host) -> None:
    with pytest.raises(tf.ValidationError, match="vmap_method must be one of"):
        tf_jax.export("tfx.scale", vmap_method="loop")
    tf_jax.export("tfx.scale")
    with pytest.raises(tf.ValidationError, match="already exported"):
        tf_jax.export("tfx.scale", vmap_method="broadcast_all")


def test_an_op_with_no_array_inputs(bridge_host: tf.Host) -> None:
    ones = tf_jax.export("tfx.ones")
    for _ in range(3):
        np.testing.assert_array_equal(jax.jit(lambda: ones(n=4))(), np.ones(4, np.float32))

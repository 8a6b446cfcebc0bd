"""Gradients through the bridges: an op's declared backward, or a typed error, never zeros.

``ext_add_kernel.add`` and ``linalg.matmul`` declare backwards: torch's ``gradcheck`` and
JAX's ``check_grads`` compare them with finite differences (float64, and complex128 for
matmul, whose torch gradient is the conjugate of JAX's). The ``tfxgrad`` ops are declared
here: one with an attribute its backward reads, one without a backward, one whose backward
returns too many gradients. The torch cases skip without torch, the JAX cases without JAX.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.interop._hosts import default_host

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_JAX = importlib.util.find_spec("jax") is not None
if HAS_TORCH:
    import torch

    from tenferro_host.interop import torch as tf_torch
if HAS_JAX:
    import jax
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from tenferro_host.interop import jax as tf_jax

needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="torch is not installed (scripts/setup installs it)"
)
needs_jax = pytest.mark.skipif(
    not HAS_JAX, reason="JAX is not installed (scripts/setup installs it)"
)
NO_BACKWARD = r"op 'tfxgrad\.noback' declares no backward"


def _scaled(ex: Any, x: tf.Tensor, factor: float = 1.0) -> tf.Tensor:
    return ex.runtime.upload(x.download() * factor)


def _scale_backward(ops: Any, inputs: Any, outputs: Any, grads: Any, factor: float = 1.0) -> Any:
    return (grads[0] * factor,)


def _op(name: str, backward: Any = None, **attributes: type) -> tf.OpSpec:
    return tf.OpSpec(
        name=name,
        signature=tf.Signature(inputs=("x",), attributes=attributes, dtypes=("float32", "float64")),
        reference=lambda x, factor=1.0: x * factor,
        variants={"cpu": _scaled},
        backward=backward,
    )


@pytest.fixture(scope="module")
def grad_host() -> tf.Host:
    """The bridges' default host, with the test package ``tfxgrad`` registered once."""
    host = default_host()
    if "tfxgrad.scale" not in host.registry.ops:
        view = host.registry.staging("tfxgrad")
        view.add_op(_op("tfxgrad.scale", _scale_backward, factor=float))
        view.add_op(_op("tfxgrad.noback"))
        view.add_op(_op("tfxgrad.wrong", lambda ops, inputs, outputs, grads: (grads[0],) * 2))
        view.commit()
    return host


def _matrices(dtype: Any, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = []
    for shape in shapes:
        a = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal(shape)
        out.append(a.astype(dtype))
    return out


# -- the declaration ---------------------------------------------------------------------------
def test_a_backward_that_is_not_callable_is_refused() -> None:
    with pytest.raises(tf.ValidationError, match=r"'p\.op': backward must be a callable") as err:
        tf.OpSpec(
            name="p.op",
            signature=tf.Signature(inputs=("x",)),
            reference=lambda x: x,
            variants={},
            backward="grad",  # type: ignore[arg-type]
        )
    assert err.value.argument == "backward" and err.value.op == "p.op"
    assert _op("p.fine").backward is None


def test_the_shipped_ops_that_declare_a_backward(grad_host: tf.Host) -> None:
    ops = grad_host.registry.ops
    declared = {name for name, record in ops.items() if record.spec and record.spec.backward}
    assert {"ext_add_kernel.add", "linalg.matmul"} <= declared
    assert "linalg.sum" not in declared


# -- torch -------------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_torch_gradcheck(grad_host: tf.Host, dtype: Any) -> None:
    add = tf_torch.export("ext_add_kernel.add", host=grad_host)
    matmul = tf_torch.export("linalg.matmul", host=grad_host)
    a, b, c = (
        torch.from_numpy(m).requires_grad_() for m in _matrices(dtype, (3, 4), (4, 5), (3, 4))
    )
    assert torch.autograd.gradcheck(matmul, (a, b))
    assert torch.autograd.gradgradcheck(matmul, (a, b))  # its backward is matmul: twice
    if dtype == np.float64:  # add takes no complex dtype
        assert torch.autograd.gradcheck(add, (a, c))


@needs_torch
def test_torch_backward_and_func_grad(grad_host: tf.Host) -> None:
    add = tf_torch.export("ext_add_kernel.add", host=grad_host)
    matmul = tf_torch.export("linalg.matmul", host=grad_host)
    x = torch.ones(3, requires_grad=True)
    add(x, x).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    grad = torch.func.grad(lambda t: add(t, t).sum())(torch.ones(3))
    assert torch.equal(grad, torch.full((3,), 2.0))
    a, b = (torch.from_numpy(m) for m in _matrices(np.float64, (3, 4), (4, 5)))
    ga, gb = torch.func.grad(lambda p, q: (matmul(p, q) ** 2).sum(), argnums=(0, 1))(a, b)
    want_a, want_b = torch.func.grad(lambda p, q: ((p @ q) ** 2).sum(), argnums=(0, 1))(a, b)
    torch.testing.assert_close(ga, want_a)
    torch.testing.assert_close(gb, want_b)
    only_b = b.clone().requires_grad_()
    matmul(a, only_b).sum().backward()  # a needs no gradient: only b's is made
    torch.testing.assert_close(only_b.grad, a.sum(0, keepdim=True).T.expand(4, 5))


@needs_torch
def test_torch_attributes_reach_the_backward(grad_host: tf.Host) -> None:
    scale = tf_torch.export("tfxgrad.scale", host=grad_host)
    x = torch.arange(4.0, dtype=torch.float64, requires_grad=True)
    scale(x, factor=3.0).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), 3.0, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda t: scale(t, factor=-2.0), (x,))
    assert torch.equal(
        torch.func.grad(lambda t: scale(t).sum())(x.detach()), torch.ones(4).double()
    )


@needs_torch
def test_torch_compile_runs_the_declared_backward(grad_host: tf.Host) -> None:
    matmul = tf_torch.export("linalg.matmul", host=grad_host)
    a, b = (torch.from_numpy(m).requires_grad_() for m in _matrices(np.float64, (3, 4), (4, 2)))

    @torch.compile(fullgraph=True)
    def loss(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (matmul(p, q) * 2).sum()

    loss(a, b).backward()
    torch.testing.assert_close(a.grad, 2 * torch.ones(3, 2, dtype=torch.float64) @ b.detach().T)
    torch.testing.assert_close(b.grad, 2 * a.detach().T @ torch.ones(3, 2, dtype=torch.float64))


@needs_torch
def test_torch_an_op_without_backward_raises_when_a_gradient_is_asked(grad_host: tf.Host) -> None:
    noback = tf_torch.export("tfxgrad.noback", host=grad_host)
    add = tf_torch.export("ext_add_kernel.add", host=grad_host)
    x = torch.ones(3, requires_grad=True)
    y = noback(x)  # the forward runs: the error comes when a gradient is asked
    assert torch.equal(y.detach(), torch.ones(3))
    with pytest.raises(tf.UnsupportedError, match=NO_BACKWARD) as err:
        y.sum().backward()
    assert err.value.op == "tfxgrad.noback" and "backward=" in str(err.value)
    with pytest.raises(tf.UnsupportedError, match=NO_BACKWARD):  # not add's part alone
        (add(x, x) + noback(x)).sum().backward()
    assert x.grad is None
    with pytest.raises(tf.UnsupportedError, match=NO_BACKWARD):
        torch.func.grad(lambda t: noback(t).sum())(torch.ones(3))
    with pytest.raises(tf.UnsupportedError, match=NO_BACKWARD):
        torch.ops.tf_tfxgrad.noback(x).sum().backward()  # the raw operator too
    assert torch.equal(noback(x.detach()), torch.ones(3))  # detached: no gradient, no error
    with torch.no_grad():
        assert not noback(x).requires_grad


@needs_torch
def test_torch_a_backward_returning_the_wrong_count_is_refused(grad_host: tf.Host) -> None:
    wrong = tf_torch.export("tfxgrad.wrong", host=grad_host)
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(tf.ValidationError, match=r"tuple of 1 gradients, one per input \(x;"):
        wrong(x).sum().backward()


@needs_torch
def test_torch_opcheck_with_inputs_that_require_grad(grad_host: tf.Host) -> None:
    a, b = (torch.from_numpy(m).requires_grad_() for m in _matrices(np.float64, (3, 4), (4, 5)))
    for name, args in (("linalg.matmul", (a, b)), ("ext_add_kernel.add", (a, a.detach() + 1))):
        op = tf_torch.export(name, host=grad_host)
        results = torch.library.opcheck(op.packet, args, raise_exception=False)
        assert all(r == "SUCCESS" for r in results.values()), (name, results)


# -- JAX ---------------------------------------------------------------------------------------
@pytest.fixture
def _jax_cpu() -> Iterator[None]:
    """On the CPU platform (the tfxgrad ops have cpu variants only), with float64."""
    with jax.default_device(jax.devices("cpu")[0]), jax.enable_x64(True):
        yield


@needs_jax
@pytest.mark.usefixtures("_jax_cpu")
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_jax_check_grads(grad_host: tf.Host, dtype: Any) -> None:
    add = tf_jax.export("ext_add_kernel.add", host=grad_host)
    matmul = tf_jax.export("linalg.matmul", host=grad_host)
    a, b, c = (jnp.asarray(m) for m in _matrices(dtype, (3, 4), (4, 5), (3, 4)))
    check_grads(matmul, (a, b), order=1, modes=("rev",))
    check_grads(matmul, (a, b), order=2, modes=("rev",))  # its backward is matmul: twice
    if dtype == np.float64:
        check_grads(add, (a, c), order=1, modes=("rev",))


@needs_jax
@pytest.mark.usefixtures("_jax_cpu")
def test_jax_grad_under_jit_and_vmap(grad_host: tf.Host) -> None:
    add = tf_jax.export("ext_add_kernel.add", host=grad_host)
    matmul = tf_jax.export("linalg.matmul", host=grad_host)
    scale = tf_jax.export("tfxgrad.scale", host=grad_host)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(jax.grad(lambda t: add(t, t).sum())(x), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(jax.jit(jax.grad(lambda t: add(t, t).sum()))(x), [2.0] * 3)
    np.testing.assert_array_equal(jax.grad(lambda t: scale(t, factor=3.0).sum())(x), [3.0] * 3)
    a, b = (jnp.asarray(m) for m in _matrices(np.float64, (3, 4), (4, 5)))
    want = jax.grad(lambda p: ((p @ b) ** 2).sum())(a)
    got = jax.jit(jax.grad(lambda p: (matmul(p, b) ** 2).sum()))(a)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    batched = jax.vmap(jax.grad(lambda p: matmul(p, b).sum()))(jnp.stack([a, 2 * a]))
    np.testing.assert_allclose(batched[1], np.ones((3, 5)) @ np.asarray(b).T, rtol=1e-12)


@needs_jax
@pytest.mark.usefixtures("_jax_cpu")
def test_jax_an_op_without_backward_raises_when_a_gradient_is_asked(grad_host: tf.Host) -> None:
    noback = tf_jax.export("tfxgrad.noback", host=grad_host)
    x = jnp.ones(3)
    for transform in (jax.grad, lambda f: jax.jit(jax.grad(f))):
        with pytest.raises(tf.UnsupportedError, match=NO_BACKWARD) as err:
            transform(lambda t: noback(t).sum())(x)
        assert err.value.op == "tfxgrad.noback"
    with pytest.raises(tf.UnsupportedError, match=NO_BACKWARD):
        jax.jvp(noback, (x,), (x,))
    # forward use, traced or not, is unchanged; a stopped gradient asks for none
    np.testing.assert_array_equal(jax.jit(noback)(x), np.ones(3))
    np.testing.assert_array_equal(jax.vmap(noback)(jnp.ones((2, 3))), np.ones((2, 3)))
    stopped = jax.grad(lambda t: noback(jax.lax.stop_gradient(t)).sum() + t.sum())(x)
    np.testing.assert_array_equal(stopped, np.ones(3))


@needs_jax
@pytest.mark.usefixtures("_jax_cpu")
def test_jax_a_backward_returning_the_wrong_count_is_refused(grad_host: tf.Host) -> None:
    wrong = tf_jax.export("tfxgrad.wrong", host=grad_host)
    with pytest.raises(tf.ValidationError, match=r"tuple of 1 gradients, one per input \(x;"):
        jax.grad(lambda t: wrong(t).sum())(jnp.ones(3))


@needs_jax
@pytest.mark.usefixtures("_jax_cpu")
def test_jax_python_scalars_get_a_typed_error(grad_host: tf.Host) -> None:
    add = tf_jax.export("ext_add_kernel.add", host=grad_host)
    with pytest.raises(tf.DTypeError, match=r"input 'lhs' is a float, not an array; pass a JAX"):
        add(1.0, 2.0)
    with pytest.raises(tf.DTypeError, match=r"input 'rhs' is a list"):
        add(jnp.ones(2), [1.0, 2.0])
    np.testing.assert_array_equal(add(np.ones(2), jnp.ones(2)), [2.0, 2.0])  # numpy arrays: fine

"""The torch bridge on the CPU: schema, values, zero-copy outputs, compile, typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.call_budget import calls_per_op

import tenferro_host as tf
from tenferro_host.provider import _op_plan

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/setup installs it)")

from tenferro_host.interop import torch as tf_torch  # noqa: E402


def test_schema_from_the_signature(bridge_host: tf.Host) -> None:
    assert tf_torch.export("ext_add_kernel.add").schema == "add(Tensor lhs, Tensor rhs) -> Tensor"
    scale = tf_torch.export("tfx.scale")
    assert scale.schema == "scale(Tensor x, *, float? factor=None, str? axes=None) -> Tensor"
    assert tf_torch.export("linalg.svd").schema.endswith("-> (Tensor, Tensor, Tensor)")


def test_values_and_the_registered_operator(bridge_host: tf.Host) -> None:
    add = tf_torch.export("ext_add_kernel.add", host=bridge_host)
    a = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    assert torch.equal(add(a, a), a + a)
    assert torch.equal(torch.ops.tf_ext_add_kernel.add(a.T, a.T), (a + a).T)
    out = add(a, a)
    assert out.stride() == (3, 1) and out.view(-1).tolist() == (a + a).view(-1).tolist()


def test_outputs_are_torch_allocations_written_in_place(
    bridge_host: tf.Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the op handle's path (the runtime allocating through torch.empty) and as the
    prepared call (torch.empty_strided in the replay's layout), the variant writes torch's own
    allocation."""
    made: list[torch.Tensor] = []

    def recording(empty: Any) -> Any:
        def recording_empty(*args: Any, **kwargs: Any) -> torch.Tensor:
            made.append(empty(*args, **kwargs))
            return made[-1]

        return recording_empty

    monkeypatch.setattr(torch, "empty", recording(torch.empty))
    monkeypatch.setattr(torch, "empty_strided", recording(torch.empty_strided))
    add = tf_torch.export("ext_add_kernel.add")
    a = torch.ones(1000)
    for _ in range(4):  # the full path, then the planned call (prepared): both write torch's
        made.clear()
        out = add(a, a)
        # the buffer the runtime or the bridge allocated through torch itself: no copy made
        assert [m.data_ptr() for m in made] == [out.data_ptr()] and out.numel() == 1000
        assert torch.equal(out, a + a)
    b = torch.ones(4, 5)
    for _ in range(4):
        made.clear()
        out = add(b, b)  # 2-D: written column-major, copied once into torch's layout
        assert len(made) == 1 and out.is_contiguous() and out.data_ptr() != made[0].data_ptr()
        assert torch.equal(out, b + b)
    if _op_plan.ENABLED:  # TENFERRO_OP_PLAN=0: the full path on every call
        states = bridge_host.op("ext_add_kernel.add").plans()  # call key -> its state
        for shape in ("float32[1000]", "float32[4, 5]"):  # the key's first input
            assert [s for key, s in states.items() if f"({shape}" in key] == ["replay"], states


def test_inputs_that_require_grad_and_views(bridge_host: tf.Host) -> None:
    add = tf_torch.export("ext_add_kernel.add")
    x = torch.arange(12.0, requires_grad=True)
    assert torch.equal(add(x, x).detach(), 2 * x.detach())  # forward only: no autograd formula
    v = torch.arange(24.0).reshape(4, 6)[1:, ::2]  # offset and strides: a strided import
    assert torch.equal(add(v, v), v + v)
    assert torch.equal(add(v.T, v.T), (v + v).T)


def test_an_output_aliasing_its_input_is_copied(bridge_host: tf.Host) -> None:
    op = tf_torch.export("tfx.passthrough")
    x = torch.arange(5.0)
    out = op(x)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    torch.library.opcheck(op.packet, (x,))


def test_a_non_compact_output_is_copied_compact(bridge_host: tf.Host) -> None:
    op = tf_torch.export("tfx.transpose")
    x = torch.arange(6.0).reshape(2, 3)
    out = op(x)
    assert torch.equal(out, x.T) and out.stride() == (2, 1)  # torch's layout, as .view() needs
    assert out.view(-1).tolist() == x.T.reshape(-1).tolist()
    torch.library.opcheck(op.packet, (x,))


def test_the_column_major_layout_by_option(bridge_host: tf.Host) -> None:
    """layout="column-major": the host's compact layout, the buffer torch allocated itself (no
    copy), and the fake kernel says the same (opcheck)."""
    op = tf_torch.export("tfx.scale_cm", layout="column-major")
    x = torch.arange(6.0).reshape(2, 3)
    out = op(x, factor=2.0)
    assert torch.equal(out, 2 * x) and out.stride() == (1, 2)
    with torch._subclasses.FakeTensorMode():
        assert op(torch.empty(2, 3)).stride() == (1, 2)
    torch.library.opcheck(op.packet, (x,), {"factor": 2.0})
    with pytest.raises(tf.ValidationError, match="another Host or layout"):
        tf_torch.export("tfx.scale_cm")
    with pytest.raises(tf.ValidationError, match="layout must be one of"):
        tf_torch.export("tfx.scale_cm", layout="F")


def test_attributes_by_keyword_and_literals(bridge_host: tf.Host) -> None:
    scale = tf_torch.export("tfx.scale")
    x = torch.ones(3)
    assert scale(x, factor=2.5).tolist() == [2.5, 2.5, 2.5]
    assert scale(x, factor=2.0, axes=(0, 1)).tolist() == [2.0, 2.0, 2.0]
    assert scale(x).tolist() == [1.0, 1.0, 1.0]  # left out: the variant's default
    torch.library.opcheck(scale.packet, (x,), {"factor": 3.0, "axes": "(0,)"})


def test_torch_compile_fullgraph(bridge_host: tf.Host) -> None:
    add = tf_torch.export("ext_add_kernel.add")
    sum_ = tf_torch.export("linalg.sum")

    @torch.compile(fullgraph=True)
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return sum_(add(a, b) * 2, axis=(0,))

    a = torch.randn(4, 3)
    torch.testing.assert_close(f(a, a), (4 * a).sum(0))


@pytest.mark.skipif(
    not _op_plan.ENABLED, reason="TENFERRO_OP_PLAN=0: every call takes the full path"
)
def test_the_exported_call_stays_within_its_call_budget(bridge_host: tf.Host) -> None:
    """The planned CPU call's cost over torch.add's, as Python-level calls (never timed): torch's
    dispatch into the Python kernels (the Autograd one, then the CPU one), the key of the
    tensors, the output's torch.empty_strided, the numpy views and the replay's launch on them
    (the prepared call; docs/frameworks.md, Costs)."""
    add = tf_torch.export("ext_add_kernel.add")
    a = torch.ones(1000)
    for _ in range(3):
        add(a, a)
    extra = calls_per_op(lambda: add.packet(a, a)) - calls_per_op(lambda: torch.add(a, a))
    assert extra <= 34  # 33.00 as the prepared call (64.00 through the op handle's path)


def test_wrong_inputs_get_typed_errors(bridge_host: tf.Host) -> None:
    add = tf_torch.export("ext_add_kernel.add")
    with pytest.raises(tf.ShapeError, match="same shape"):
        add(torch.ones(2), torch.ones(3))
    with pytest.raises(tf.DTypeError, match="one dtype"):
        add(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(tf.DTypeError, match="int8 is not supported"):  # through numpy's view
        add(torch.ones(2, dtype=torch.int8), torch.ones(2, dtype=torch.int8))
    with pytest.raises(tf.ValidationError, match="through DLPack"):  # numpy has no bfloat16
        add(torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(tf.ValidationError, match="no attributes"):
        tf_torch.export("tfx.scale")(torch.ones(2), factr=2.0)
    with pytest.raises(tf.ValidationError, match="Python literal"):
        tf_torch.export("tfx.scale").packet(torch.ones(2), axes="(0,")
    with pytest.raises(tf.ValidationError, match="another Host"):
        tf_torch.export("ext_add_kernel.add", host=tf.Host())
    with pytest.raises(tf.ValidationError, match="no ops of package"):
        tf_torch.export_package("no_such_package")


def test_export_package_exports_every_op(bridge_host: tf.Host) -> None:
    ops = tf_torch.export_package("linalg")
    assert "linalg.matmul" in ops and all(n.startswith("linalg.") for n in ops)
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    torch.testing.assert_close(ops["linalg.matmul"](a, b), a @ b)
    np.testing.assert_allclose(
        ops["linalg.einsum"](a, b, spec="ij,jk->ki").numpy(), (a @ b).T.numpy(), rtol=1e-12
    )

"""The kit's framework cases (``check --frameworks``, ``frameworks_test``): samples drawn from
the op's declared shapes, the op's declared tolerances, and a failing ``opcheck`` reported as a
failed case on every torch version."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.testing import frameworks
from tenferro_host.testing.case import Outcome
from tenferro_host.testing.suite_shapes import PROBE_SHAPES, probe_sets

_view = tf.cpu.CpuRuntime.strided_view


def _mm(ex: Any, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    out = ex.runtime.empty(a.dtype, (a.shape[0], b.shape[1]))
    if out.numel:
        np.matmul(_view(a), _view(b), out=_view(out))
    return out


def _rowsum_plus(offset: float) -> Any:
    """A row sum that is off by ``offset`` in every element."""

    def variant(ex: Any, x: tf.Tensor) -> tf.Tensor:
        out = ex.runtime.empty(x.dtype, (x.shape[0],))
        if out.numel:
            _view(out)[...] = _view(x).sum(axis=1) + offset
        return out

    return variant


def _copy(ex: Any, x: tf.Tensor) -> tf.Tensor:
    out = ex.runtime.empty(x.dtype, x.shape)
    if out.numel:
        _view(out)[...] = _view(x)
    return out


def _refuse(ex: Any, x: tf.Tensor) -> tf.Tensor:
    raise tf.ValidationError("this op refuses everything", argument="x", op="tfkit.refuse")


MM = tf.OpSpec(
    name="tfkit.mm",
    signature=tf.Signature(
        inputs=("a", "b"),
        shapes={"a": ("m", "k"), "b": ("k", "n")},
        samples=({"m": 16, "k": 8, "n": 4},),
        shape_rule=lambda a, b: (a[0], b[1]),
    ),
    reference=lambda a, b: a @ b,
    variants={"cpu": _mm},
    rtol=1e-5,
    atol=1e-5,
    reduction_length=lambda a, b: a[1],
)


def _rowsum(name: str, offset: float) -> tf.OpSpec:
    """Off by ``offset``, within atol * sqrt(k) of the reference for every k >= 3 when
    ``offset`` is 1.5e-3, but not within the declared atol itself (1e-3)."""
    return tf.OpSpec(
        name=name,
        signature=tf.Signature(
            inputs=("x",), shapes={"x": ("m", "k")}, shape_rule=lambda x: (x[0],)
        ),
        reference=lambda x: x.sum(axis=1),
        variants={"cpu": _rowsum_plus(offset)},
        rtol=1e-6,
        atol=1e-3,
        reduction_length=lambda x: x[1],
    )


OPS = (
    MM,
    _rowsum("tfkit.rowsum_close", 1.5e-3),
    _rowsum("tfkit.rowsum_far", 0.5),
    tf.OpSpec(
        name="tfkit.liar",
        signature=tf.Signature(inputs=("x",)),
        reference=lambda x: x.copy(),
        variants={"cpu": _copy},
    ),
    tf.OpSpec(
        name="tfkit.refuse",
        signature=tf.Signature(inputs=("x",)),
        reference=lambda x: x,
        variants={"cpu": _refuse},
    ),
)


@pytest.fixture(scope="module")
def kit_host(bridge_host: tf.Host) -> tf.Host:
    """The bridges' host (the kit's framework cases use it), with the ``tfkit`` ops."""
    if "tfkit.mm" not in bridge_host.registry.ops:
        view = bridge_host.registry.staging("tfkit")
        for spec in OPS:
            view.add_op(spec)
        view.commit()
    return bridge_host


#: (check, status, message) of both framework cases of an op that passes them.
BOTH_PASSED = [("torch-opcheck", "passed", ""), ("jax", "passed", "")]


def _cpu_outcomes(host: tf.Host, name: str, check: str | None = None) -> list[Outcome]:
    cases = frameworks.framework_cases(host, name)
    return [c.run() for c in cases if c.backend == "cpu" and check in (None, c.check)]


def test_a_declared_op_gets_samples_of_its_declared_shapes() -> None:
    got = frameworks.samples(MM, {})
    shapes = [[a.shape for a in arrays] for arrays, _ in got]
    assert shapes == [[(3, 5), (5, 7)], [(33, 17), (17, 5)]]  # the suite's odd, non-multiple
    assert shapes == [list(s.shapes) for s in probe_sets(MM, {})[:2]]
    assert all(a.dtype == np.float32 for arrays, _ in got for a in arrays)


def test_an_undeclared_op_gets_the_suites_probe_shapes() -> None:
    spec = OPS[3]  # tfkit.liar: no declared shapes, its reference takes any
    shapes = [[a.shape for a in arrays] for arrays, _ in frameworks.samples(spec, {})]
    assert shapes == [[PROBE_SHAPES[0]], [PROBE_SHAPES[1]]]


def test_a_declared_op_passes_its_framework_cases(kit_host: tf.Host) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    outcomes = _cpu_outcomes(kit_host, "tfkit.mm")
    assert [(o.case.check, o.status, o.message) for o in outcomes] == BOTH_PASSED


def test_the_declared_tolerance_rule_is_used(kit_host: tf.Host) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    close = _cpu_outcomes(kit_host, "tfkit.rowsum_close")
    assert [(o.case.check, o.status, o.message) for o in close] == BOTH_PASSED
    far = _cpu_outcomes(kit_host, "tfkit.rowsum_far")
    assert [o.status for o in far] == ["failed", "failed"]
    # the first sample is (3, 5): atol 1e-3 grown by sqrt(5), the reduction length
    assert all("differs from the reference" in o.message for o in far)
    assert all("atol=0.00223" in o.message for o in far), [o.message for o in far]


def test_an_op_whose_fake_kernel_lies_fails_opcheck(
    kit_host: tf.Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    tf_torch = pytest.importorskip("tenferro_host.interop.torch")

    def lying_fake(self: Any, *tensors: Any, **attrs: Any) -> Any:
        return tensors[0].new_empty((*tensors[0].shape, 2))  # one dimension too many

    monkeypatch.setattr(tf_torch.TorchOp, "_fake", lying_fake)  # the fake export registers
    [outcome] = _cpu_outcomes(kit_host, "tfkit.liar", "torch-opcheck")
    assert outcome.status == "failed", outcome.message
    assert outcome.message.startswith("opcheck, torch on cpu, shapes [(7,)]: ")
    assert "test_faketensor failed" in outcome.message
    assert "AttributeError" not in outcome.message


def test_an_op_refusing_every_input_fails_opcheck_naming_the_error(kit_host: tf.Host) -> None:
    pytest.importorskip("torch")
    [outcome] = _cpu_outcomes(kit_host, "tfkit.refuse", "torch-opcheck")
    assert outcome.status == "failed", outcome.message
    assert "test_schema failed: ValidationError" in outcome.message
    assert "this op refuses everything" in outcome.message

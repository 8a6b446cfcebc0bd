"""The kit on ops unlike the example: 2-D ops, a matmul-like op with (m, k), (k, n), a
reduction, a multi-launch op and a large 1-D op, each declaring its shapes. The conformance
suite passes every correct one and fails a wrong one of each kind; declarations are checked
at registration."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from support.kit_install import KIT_FIXTURES, install_kit_fixtures
from support.op_registration import one_input_op, register_op

import tenferro_host as tf
from tenferro_host.testing import check_op
from tenferro_host.testing.conformance import run_conformance

sys.path.insert(0, str(KIT_FIXTURES / "tf_kit_shapes"))
from tf_kit_shapes.plugin import specs


def _host(wrong: bool) -> tf.Host:
    host = tf.Host()
    view = host.registry.staging("tf-kit-shapes")
    for spec in specs(wrong):
        view.add_op(spec)
    view.commit()
    return host


OPS = [
    "tf_kit_shapes.softmax",
    "tf_kit_shapes.mm",
    "tf_kit_shapes.row_sums",
    "tf_kit_shapes.scale_add",
    "tf_kit_shapes.double",
]


@pytest.fixture(scope="module")
def right():
    return _host(wrong=False)


def test_correct_ops_of_every_kind_pass_the_suite(right):
    report = run_conformance(right, *OPS, backends=["cpu"])
    assert report.passed, [(o.case.id, o.message) for o in report.failures]
    statuses = {(o.case.op, o.case.check): o.status for o in report.outcomes}
    for op in OPS:
        assert statuses[(op, "values")] == "passed"
    for op in (
        "tf_kit_shapes.row_sums",
        "tf_kit_shapes.scale_add",
        "tf_kit_shapes.double",
    ):  # DSL: CUDA and WGSL
        assert statuses[(op, "compile")] == "passed"


@pytest.mark.parametrize("op", OPS)
def test_a_wrong_op_of_each_kind_fails_values(op):
    report = run_conformance(_host(wrong=True), op, backends=["cpu"], skip=["compile"])
    failed = {o.case.check: o.message for o in report.failures}
    assert "values" in failed, report.summary()
    assert "differs from the reference" in failed["values"]
    assert all(o.case.check != "compile" for o in report.outcomes)


def test_skip_names_are_checked(right):
    with pytest.raises(tf.ValidationError, match="not checks; use values, views"):
        run_conformance(right, "tf_kit_shapes.double", skip=["valus"])


def test_run_defaults_follow_the_declaration(right):
    sig = right.registry.op("tf_kit_shapes.softmax").spec.signature
    assert sig.input_shapes() == [(64, 33)]
    mm = right.registry.op("tf_kit_shapes.mm").spec.signature
    assert mm.input_shapes((5, 7)) == [(5, 7), (7, 7)]
    assert mm.input_shapes(elements=10_000) == [(100, 100), (100, 100)]
    with pytest.raises(tf.ValidationError, match="does not fit input 'a'"):
        mm.input_shapes((5,))
    check_op(right, "tf_kit_shapes.mm", "cpu")  # default shapes from the declaration
    check_op(right, "tf_kit_shapes.softmax", "cpu", shape=(3, 9))


def test_the_tolerance_rule_grows_with_the_reduction_length(right):
    spec = right.registry.op("tf_kit_shapes.mm").spec
    rtol, atol = spec.tolerance("float32", [(4, 400), (400, 4)])
    assert rtol == pytest.approx(2e-4) and atol == pytest.approx(2e-4)
    assert spec.tolerance("float32") == (1e-5, 1e-5)


@pytest.mark.parametrize(
    ("signature", "message"),
    [
        (tf.Signature(inputs=("a", "b"), shapes={"a": ("m",)}), "declare every input"),
        (tf.Signature(inputs=("a",), shapes={"a": ("m", "n-1")}), "is not a dimension"),
        (tf.Signature(inputs=("a",), shapes={"a": ("*x", "*y")}), "more than one variadic"),
        (tf.Signature(inputs=("a",), shapes={"a": ["m"]}), "must be a tuple"),
        (tf.Signature(inputs=("a",), shapes={"a": ("m",)}, samples=({"n": 3},)), "'m' None"),
        (tf.Signature(inputs=("a",), samples=({"m": 3},)), "samples need shapes="),
        (tf.Signature(inputs=("a",), sample_attributes={"k": 1}), "not its attributes"),
        (tf.Signature(inputs=("a",), shapes=lambda: 1 / 0), "raised ZeroDivisionError"),
    ],
)
def test_a_wrong_declaration_is_refused_at_registration(signature, message):
    with pytest.raises(tf.ValidationError, match=message) as info:
        tf.OpSpec(name="kit_bad.op", signature=signature, reference=np.copy, variants={})
    assert "kit_bad.op" in str(info.value)


def test_check_exits_0_on_the_installed_package(subproc, tmp_path_factory):
    """`tenferro-host check` on the pip-installed fixture distribution (every backend here)."""
    site = install_kit_fixtures(tmp_path_factory)
    proc = subproc.cli("check", "tf_kit_shapes", "--json", paths=(site,))
    report = json.loads(proc.stdout)
    bad = [c for c in report["cases"] if c["status"] in ("failed", "error")]
    assert proc.returncode == 0 and not bad, bad
    checked = {c["op"] for c in report["cases"] if c["status"] == "passed"}
    assert checked == set(OPS)


def test_views_blames_layout_only_when_compact_inputs_pass():
    report = run_conformance(
        _host(wrong=True), "tf_kit_shapes.mm", backends=["cpu"], skip=["values"]
    )
    views = next(o for o in report.outcomes if o.case.check == "views")
    assert views.status == "failed"
    assert "layout is not to blame" in views.message
    assert "non-compact input silently" not in views.message


def test_an_undeclared_2d_op_is_called_on_shapes_its_reference_takes():
    """No declaration: the once-per-set checks take the first probe shape the reference
    takes ((3, 5) here), not a fixed (7,)."""

    def reference(x):
        if x.ndim != 2:
            raise ValueError("2-D only")
        return x * 2

    def variant(ex, x):
        from tenferro_host.cpu import CpuRuntime

        if x.ndim != 2 or x.dtype.name != "float32":
            raise tf.ShapeError("2-D float32 only", argument="x", op="undeclared.double")
        out = ex.runtime.empty(x.dtype, x.shape)
        if out.numel:
            np.multiply(CpuRuntime.strided_view(x), 2, out=CpuRuntime.strided_view(out))
        return out

    host = tf.Host()
    register_op(host, "undeclared", one_input_op("undeclared.double", {"cpu": variant}, reference))
    report = run_conformance(host, "undeclared.double", backends=["cpu"])
    assert report.passed, [(o.case.id, o.message) for o in report.failures]
    assert {o.case.check: o.status for o in report.outcomes}["sessions"] == "passed"

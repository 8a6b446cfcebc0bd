"""The kit on ops unlike the example: 2-D ops, a matmul-like op with (m, k), (k, n), a
reduction, a multi-launch op and a large 1-D op, each declaring its shapes. The conformance
suite passes every correct one and fails a wrong one of each kind; declarations are checked
at registration."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.cpu import CpuRuntime
from tenferro_host.testing import check_op
from tenferro_host.testing.conformance import run_conformance


@K.kernel
def row_sums(out: K.Array[K.f32], m: K.Array[K.f32]):
    r = K.ABSOLUTE_POS
    if r < m.shape[0]:
        acc = K.f32(0)
        for c in range(m.shape[1]):
            acc += m[r, c]
        out[r] = acc


@K.kernel
def scale(out: K.Array[K.f32], x: K.Array[K.f32], factor: K.f32):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * factor


@K.kernel
def add_one(out: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = out[i] + K.f32(1)


def _np(t):
    return CpuRuntime.strided_view(t)


def _store(ex, values):
    out = ex.runtime.empty(tf.dtype(values.dtype), values.shape)
    if out.numel:
        _np(out)[...] = values
    return out


def _f32(op, *ts):
    for t in ts:
        if t.dtype.name != "float32":
            raise tf.DTypeError("use float32", argument="x", op=op)


def softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True, initial=-np.inf))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def softmax_cpu(ex, x, wrong=False):
    _f32("kit2.softmax", x)
    v = _np(x)
    if wrong:  # normalizes columns, not rows: right only on square symmetric input
        e = np.exp(v - v.max(axis=0, keepdims=True, initial=-np.inf))
        return _store(ex, (e / e.sum(axis=0, keepdims=True)).astype(np.float32))
    return _store(ex, softmax_ref(v))


def mm_cpu(ex, a, b, wrong=False):
    _f32("kit2.mm", a, b)
    va, vb = _np(a), _np(b)
    if wrong:  # drops the last term of every sum
        va, vb = va[:, :-1], vb[:-1, :]
    return _store(ex, (va @ vb).astype(np.float32))


def row_sums_dsl(ex, x, wrong=False):
    _f32("kit2.row_sums", x)
    if not x.is_compact():
        x = ex.runtime.canonicalize(x)
    with ex.jit("kit2.row_sums") as js:
        out = js.alloc_output(x.dtype, (x.shape[0],))
        if x.numel or x.shape[0]:
            count = 1 if wrong else js.cube_count_1d(x.shape[0])  # wrong: one cube of rows
            js.launch(row_sums, count, 16 if wrong else js.cube_dim_1d(), out, x)
    return out


def scale_add_dsl(ex, x, wrong=False):
    """Two launches: out = 2 x, then out += 1."""
    _f32("kit2.scale_add", x)
    if not x.is_compact():
        x = ex.runtime.canonicalize(x)
    with ex.jit("kit2.scale_add") as js:
        out = js.alloc_output(x.dtype, x.shape)
        if x.numel:
            js.launch(scale, js.cube_count_1d(x.numel), js.cube_dim_1d(), out, x, np.float32(2))
            count = 1 if wrong else js.cube_count_1d(x.numel)  # wrong: one cube only
            js.launch(add_one, count, js.cube_dim_1d(), out)
    return out


def double_dsl(ex, x, wrong=False):
    _f32("kit2.double", x)
    if not x.is_compact():
        x = ex.runtime.canonicalize(x)
    with ex.jit("kit2.double") as js:
        out = js.alloc_output(x.dtype, x.shape)
        if x.numel:
            # wrong: covers only the first 4096 elements (fine on every small shape)
            n = min(x.numel, 4096) if wrong else x.numel
            js.launch(scale, js.cube_count_1d(n), js.cube_dim_1d(), out, x, np.float32(2))
    return out


def _specs(wrong: bool) -> list[tf.OpSpec]:
    def v(fn):
        return lambda ex, *t: fn(ex, *t, wrong=wrong)

    matrix = {"x": ("m", "n")}
    return [
        tf.OpSpec(
            name="kit2.softmax",
            signature=tf.Signature(inputs=("x",), shapes=matrix, samples=({"m": 64, "n": 33},)),
            reference=softmax_ref,
            variants={"cpu": v(softmax_cpu)},
            reduction_length=lambda x: x[1],
        ),
        tf.OpSpec(
            name="kit2.mm",
            signature=tf.Signature(
                inputs=("a", "b"),
                shapes={"a": ("m", "k"), "b": ("k", "n")},
                shape_rule=lambda a, b: (a[0], b[1]),
            ),
            reference=lambda a, b: (a @ b).astype(np.float32),
            variants={"cpu": v(mm_cpu)},
            rtol=1e-5,
            atol=1e-5,
            reduction_length=lambda a, b: a[1],
        ),
        tf.OpSpec(
            name="kit2.row_sums",
            signature=tf.Signature(inputs=("x",), shapes=matrix, shape_rule=lambda s: s[:1]),
            reference=lambda x: x.sum(axis=1, dtype=np.float32),
            variants={"dsl": v(row_sums_dsl)},
            reduction_length=lambda x: x[1],
        ),
        tf.OpSpec(
            name="kit2.scale_add",
            signature=tf.Signature(inputs=("x",), shapes={"x": ("*dims",)}),
            reference=lambda x: (2 * x + 1).astype(np.float32),
            variants={"dsl": v(scale_add_dsl)},
        ),
        tf.OpSpec(
            name="kit2.double",
            signature=tf.Signature(inputs=("x",), shapes={"x": ("n",)}),
            reference=lambda x: 2 * x,
            variants={"dsl": v(double_dsl)},
        ),
    ]


def _host(wrong: bool) -> tf.Host:
    host = tf.Host()
    view = host.registry.staging("kit2")
    for spec in _specs(wrong):
        view.add_op(spec)
    view.commit()
    return host


OPS = ["kit2.softmax", "kit2.mm", "kit2.row_sums", "kit2.scale_add", "kit2.double"]


@pytest.fixture(scope="module")
def right():
    return _host(wrong=False)


def test_correct_ops_of_every_kind_pass_the_suite(right):
    report = run_conformance(right, *OPS, backends=["cpu"])
    assert report.passed, [(o.case.id, o.message) for o in report.failures]
    statuses = {(o.case.op, o.case.check): o.status for o in report.outcomes}
    for op in OPS:
        assert statuses[(op, "values")] == "passed"
    for op in ("kit2.row_sums", "kit2.scale_add", "kit2.double"):  # DSL: CUDA and WGSL
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
        run_conformance(right, "kit2.double", skip=["valus"])


def test_run_defaults_follow_the_declaration(right):
    sig = right.registry.op("kit2.softmax").spec.signature
    assert sig.input_shapes() == [(64, 33)]
    mm = right.registry.op("kit2.mm").spec.signature
    assert mm.input_shapes((5, 7)) == [(5, 7), (7, 7)]
    assert mm.input_shapes(elements=10_000) == [(100, 100), (100, 100)]
    with pytest.raises(tf.ValidationError, match="does not fit input 'a'"):
        mm.input_shapes((5,))
    check_op(right, "kit2.mm", "cpu")  # default shapes from the declaration
    check_op(right, "kit2.softmax", "cpu", shape=(3, 9))


def test_the_tolerance_rule_grows_with_the_reduction_length(right):
    spec = right.registry.op("kit2.mm").spec
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
        tf.OpSpec(name="kit2.bad", signature=signature, reference=np.copy, variants={})
    assert "kit2.bad" in str(info.value)

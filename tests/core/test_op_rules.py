"""How an op's rules get the call's attributes (docs/contract.md, "Operations"): the inputs'
dtypes or shapes positionally, by keyword exactly the attributes a rule names, read once when
the op is declared; a rule that raises is a RuleError naming the op and the rule."""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.interop._bridge import ExportedOp

CONTRACT = Path(__file__).parents[2] / "docs" / "contract.md"
ATTRIBUTES = {"axis": int, "factor": float}


def drop_axis(ex, x, axis=0, factor=1.0):
    view = tf.cpu.CpuRuntime.strided_view
    out = ex.runtime.empty(x.dtype, x.shape[:axis] + x.shape[axis + 1 :])
    if out.numel:
        np.sum(view(x), axis=axis, out=view(out))
    return out


def spec(name="rules.sum", variant=drop_axis, reduction_length=None, **signature):
    signature.setdefault("attributes", ATTRIBUTES)
    signature.setdefault("shape_rule", lambda x, axis=0: x[:axis] + x[axis + 1 :])
    return tf.OpSpec(
        name=name,
        signature=tf.Signature(inputs=("x",), **signature),
        reference=lambda x, axis=0, factor=1.0: x.sum(axis=axis),
        variants={"cpu": variant},
        reduction_length=reduction_length,
    )


def register(host, *specs):
    view = host.registry.staging("test-op-rules")
    for s in specs:
        view.add_op(s)
    view.commit()


@pytest.fixture
def x(host):
    return host.backend("cpu").upload(np.ones((3, 4), np.float32))


def test_the_contracts_scale_example_runs_as_written():
    """The contract's my_pkg.scale: ``shape_rule=lambda shape: shape`` on an op with an
    attribute, registered and run with it (the example's own last lines)."""
    blocks = re.findall(r"^```python\n(.*?)^```$", CONTRACT.read_text(), re.M | re.S)
    example = next(b for b in blocks if 'name="my_pkg.scale"' in b)
    host = tf.Host()
    scope = {"np": np, "tf": tf, "host": host, "cpu": host.backend("cpu")}
    exec(example, scope)  # noqa: S102 - the documentation's own code
    x = scope["cpu"].upload(np.ones(3, np.float32))
    assert host.run("my_pkg.scale", x, factor=3).download().tolist() == [3.0] * 3


def test_each_rule_gets_exactly_the_attributes_it_names(host, x):
    seen = {}

    def record(kind, value, **attrs):
        seen[kind] = attrs
        return value

    register(
        host,
        spec(
            "rules.none",
            shape_rule=lambda shape: record("shape", shape[1:]),
            dtype_rule=lambda dt: record("dtype", dt),
        ),
        spec(
            "rules.named",
            shape_rule=lambda shape, *, axis=0: record("shape", shape[1:], axis=axis),
            dtype_rule=lambda dt, **every: record("dtype", dt, **every),
        ),
    )
    host.run("rules.none", x, axis=0, factor=2.0)
    assert seen == {"shape": {}, "dtype": {}}
    host.run("rules.named", x, axis=0, factor=2.0)
    assert seen == {"shape": {"axis": 0}, "dtype": {"axis": 0, "factor": 2.0}}


def test_the_tolerance_the_declared_shapes_and_the_bridges_take_attributes_alike(host):
    s = spec(
        reduction_length=lambda x, axis=0: x[axis],
        shapes=lambda axis=0: {"x": ("m", "n")} if axis < 2 else None,
        sample_attributes={"factor": 2.0},
    )
    rtol, _ = s.tolerance("float32", [(400, 9)], {"axis": 0, "factor": 2.0})
    assert abs(rtol - 1e-5 * 20) < 1e-12
    assert s.signature.declared_shapes({"axis": 3, "factor": 2.0}) is None
    assert s.signature.declared_shapes() == {"x": ("m", "n")}  # the samples: factor only
    register(host, s)
    bridge = ExportedOp(host, s.name)  # what torch and JAX see, without either
    assert bridge.output_types([tf.float32], [(3, 4)], {"axis": 1, "factor": 2.0}) == [
        (tf.float32, (3,))
    ]


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (math.prod, 400 * 9),  # a keyword-only parameter with a default (start) keeps it
        (max, 400),  # a builtin whose parameters cannot be read: the inputs only
        (lambda *shapes, axis=0: shapes[0][axis], 9),  # the inputs through *args, and axis=1
    ],
)
def test_library_callables_are_rules(length, expected):
    s = spec(reduction_length=length)
    rtol, _ = s.tolerance("float32", [(400, 9)], {"axis": 1, "factor": 2.0})
    assert abs(rtol - 1e-5 * math.sqrt(expected)) < 1e-12


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (
            {"shape_rule": lambda shape, scale: shape},
            "shape_rule (<lambda>) names 'scale', neither an input slot (its first 1 positional",
        ),
        ({"dtype_rule": lambda: "float32"}, "dtype_rule (<lambda>) takes 0 positional"),
        (
            {"shape_rule": "different"},
            "shape_rule must be a callable (dtype_rule and shape_rule may also be 'same')",
        ),
        (
            {"shapes": lambda axes: None},
            "shapes (<lambda>) names 'axes', not a declared attribute (axis, factor), without a",
        ),
        ({"reduction_length": lambda x, n: x[0]}, "op 'rules.sum': reduction_length"),
    ],
)
def test_a_rule_parameter_that_can_never_be_given_is_refused_when_declared(declared, message):
    length = declared.pop("reduction_length", None)
    with pytest.raises(tf.ValidationError, match=re.escape(message)):
        spec(reduction_length=length, **declared)


def test_which_attributes_a_rule_takes_is_read_once(host, x, monkeypatch):
    """When the op is declared, never per call: a call only picks the attributes out."""
    register(host, spec(dtype_rule=lambda dt, factor=1.0: dt))
    host.run("rules.sum", x, axis=1)
    read, signature = [], inspect.signature
    monkeypatch.setattr(inspect, "signature", lambda *a, **k: read.append(a) or signature(*a, **k))
    for axis in (0, 1, 0):
        assert host.run("rules.sum", x, axis=axis, factor=2.0).shape == (x.shape[1 - axis],)
    assert read == []


def test_a_raising_rule_is_a_rule_error_naming_the_op_and_the_rule(host, x):
    register(host, spec(shape_rule=lambda shape, axis=0: shape[axis + 5]))
    with pytest.raises(tf.RuleError) as info:
        host.run("rules.sum", x, axis=1)
    error = info.value
    assert (error.op, error.rule) == ("rules.sum", "shape_rule")
    assert isinstance(error, tf.PluginError) and isinstance(error.__cause__, IndexError)
    assert "shape_rule (<lambda>) of op 'rules.sum' raised IndexError" in str(error)
    assert "bug in the op's package" in str(error)


def test_a_typed_error_from_a_rule_passes_as_itself(host, x):
    def shape(x, axis=0, factor=1.0):
        if factor < 0:
            raise tf.ValidationError(f"factor {factor} is negative", argument="factor")
        return x[:axis] + x[axis + 1 :]

    register(host, spec(shape_rule=shape))
    with pytest.raises(tf.ValidationError, match=r"factor -1\.0 is negative") as info:
        host.run("rules.sum", x, factor=-1.0)
    assert not isinstance(info.value, tf.RuleError)

"""A variant's declared requirement (``OpSpec.variant_requirements``): its unmet reason shows
in ``caps``/``ops`` per variant, a raising check becomes the reason, and the host refuses the
variant up front with the declared reason and feature (no fallback to another variant)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest
from support.op_registration import one_input_op, register_op
from tenferro_host_linalg import cupy_bridge

import tenferro_host as tf
from tenferro_host._cli import main, ops_report

REASON = "libfoo is not installed; pip install libfoo"


def _double(ex, x):
    return ex.runtime.upload(np.asarray(x.download()) * 2)


def _host_with(unmet):
    host = tf.Host()
    requirement = tf.Requirement(feature="libfoo", unmet=unmet)
    spec = one_input_op(
        "req_test.double",
        {"cpu": _double},
        reference=lambda x: x * 2,
        variant_requirements={"cpu": requirement},
    )
    register_op(host, "req-test", spec)
    return host


def _entry(host, name):
    return next(o for o in ops_report(host) if o["name"] == name)


def test_unmet_requirement_is_listed_and_refused_up_front():
    calls = []
    host = _host_with(lambda: calls.append(1) or REASON)
    assert not calls  # nothing is checked at registration
    entry = _entry(host, "req_test.double")
    assert entry["unavailable"] == {"cpu": REASON}
    assert entry["variants"] == {"cpu": "cpu"}  # still the declared variant: no fallback
    x = host.backend("cpu").upload(np.ones(3, dtype=np.float32))
    with pytest.raises(tf.UnsupportedError, match="libfoo is not installed") as info:
        host.run("req_test.double", x)
    assert info.value.feature == "libfoo" and info.value.reason == REASON
    assert info.value.op == "req_test.double" and info.value.backend == "cpu:0"


def test_met_requirement_runs():
    host = _host_with(lambda: None)
    assert _entry(host, "req_test.double")["unavailable"] == {}
    x = host.backend("cpu").upload(np.ones(3, dtype=np.float32))
    assert host.run("req_test.double", x).download().tolist() == [2.0, 2.0, 2.0]


def test_raising_requirement_is_a_reason_naming_the_op():
    def broken():
        raise RuntimeError("probe exploded")

    host = _host_with(broken)
    reason = _entry(host, "req_test.double")["unavailable"]["cpu"]
    assert "req_test.double" in reason and "'req_test'" in reason
    assert "RuntimeError: probe exploded" in reason
    x = host.backend("cpu").upload(np.ones(3, dtype=np.float32))
    with pytest.raises(tf.UnsupportedError, match="probe exploded"):
        host.run("req_test.double", x)


@pytest.mark.parametrize(
    ("requirements", "message"),
    [
        ({"dsl": tf.Requirement(feature="x", unmet=lambda: None)}, "not its variants"),
        ({"cpu": lambda: None}, "Requirement"),
    ],
    ids=["undeclared-variant", "not-a-requirement"],
)
def test_requirements_must_name_declared_variants_and_be_requirements(requirements, message):
    with pytest.raises(tf.ValidationError, match=message):
        one_input_op("req_test.bad", {"cpu": _double}, variant_requirements=requirements)


def _cli(*argv):
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert main(list(argv)) == 0
    return buffer.getvalue()


@pytest.mark.parametrize("state", ["missing", "present", "raising"])
def test_linalg_cuda_variants_report_cupy(monkeypatch, state):
    """Every linalg op's cuda variant shows CuPy's state in ops/caps, JSON and table."""

    def unmet():
        if state == "raising":
            raise ImportError("broken CuPy build")
        return None if state == "present" else REASON

    monkeypatch.setattr(cupy_bridge, "cupy_requirement_unmet", unmet)
    ops = json.loads(_cli("ops", "--json"))
    caps = json.loads(_cli("caps", "--json"))
    assert caps["schema_version"] == 1
    for listing in (ops, caps["ops"]):
        linalg = [o for o in listing if o["name"].startswith("linalg.")]
        assert len(linalg) == 8
        for o in linalg:
            if state == "present":
                assert o["unavailable"] == {}
            else:
                assert set(o["unavailable"]) == {"cuda-raw"}
                assert ("broken CuPy build" if state == "raising" else REASON) in (
                    o["unavailable"]["cuda-raw"]
                )
    monkeypatch.setenv("COLUMNS", "80")
    flat = " ".join(_cli("ops").split())  # the notes under the table wrap between words
    assert ("cuda-raw [1]" in flat) == (state != "present")
    if state == "missing":  # one reason for the 8 ops: said once, under the table
        assert flat.count(" ".join(REASON.split())) == 1
    if state == "raising":
        assert "raised ImportError: broken CuPy build" in flat


def test_default_linalg_reason_without_cupy(monkeypatch):
    """Here CuPy is hidden: the reason says it is not installed and how to install it."""
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)
    reason = cupy_bridge.CUPY.unmet()
    assert reason is not None and "pip install cupy-cuda13x" in reason

# DSL annotations (K.Array[K.F]) are not Python types.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""What ``handle.plans()`` says per call key, on every backend: a call recorded twice alike is
replayed and says so, each key is its own entry (the same dtypes with other shapes, layouts,
shared storage are other keys), the real reason a call stays on the full path (an empty
output), no plan while plans are switched off, and at most ``MAX_PLANS`` per handle."""

from __future__ import annotations

from typing import Any

import pytest
from support.backends import BEHAVIOUR_KINDS, kind_params
from support.plan_backends import ADD, PlanBackend, backend_fixture

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import _op_plan, _plan_table

PAIR = "tests_plan_states.copy_and_empty"
#: the state of the add's key of two transposed views: numpy takes any view; the others' add
#: canonicalizes it (a copy, which is no input of the call)
VIEW_STATE = {
    "cpu": "replay",
    "webgpu": "full path: DSL argument 'lhs' is not a non-empty input or output tensor",
    "cuda-stand-in": "full path: launch argument 1 is not a non-empty input or output tensor",
}
backend = backend_fixture()


@K.kernel
def copy_kernel(out: K.Array[K.F], x: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i]


def _copy_and_empty(ex: Any, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A copy of ``x`` (one DSL launch) and an empty second output."""
    with ex.jit(PAIR) as js:
        out, empty = js.alloc_output(x.dtype, x.shape), js.alloc_output(x.dtype, (0,))
        js.launch(copy_kernel, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x)
    return out, empty


def test_a_call_recorded_twice_alike_is_replayed_and_says_so(backend: PlanBackend) -> None:
    a, b = backend.tensor("float32", (64,)), backend.tensor("float32", (64,))
    backend.host.op(ADD).forget_plans()
    assert backend.observe(True, ADD, a, b) == backend.observe(False, ADD, a, b, calls=1)
    assert "replay" in backend.host.op(ADD).plans().values()


def test_each_key_is_its_own_entry(backend: PlanBackend) -> None:
    x, y = backend.tensor("float32", (4,)), backend.tensor("float32", (2, 3))
    wide = backend.tensor("float32", (3, 4))
    calls = [(x, x), (y, y), (y, y.transpose().transpose()), (wide.transpose(), wide.transpose())]
    calls.append((backend.tensor("float32", (4,)), backend.tensor("float32", (4,))))
    handle = backend.host.op(ADD)
    handle.forget_plans()
    for a, b in calls:
        for _ in range(3):
            backend.host.run(ADD, a, b)
    rt, plans = backend.rt.name, handle.plans()
    transposed = "float32[4, 3] strides (3, 1) offset 0"
    assert set(plans) == {
        f"{rt}(float32[4], float32[4], sharing (0, 0))",
        f"{rt}(float32[2, 3], float32[2, 3], sharing (0, 0))",
        f"{rt}({transposed}, {transposed}, sharing (0, 0))",
        f"{rt}(float32[4], float32[4])",
    }, plans
    compact = [state for key, state in plans.items() if "strides" not in key]
    assert compact == ["replay"] * 3, plans
    assert plans[f"{rt}({transposed}, {transposed}, sharing (0, 0))"] == VIEW_STATE[backend.name]


@pytest.mark.parametrize("backend", kind_params(*BEHAVIOUR_KINDS), indirect=True)  # a DSL op
def test_an_empty_output_is_the_reason_given(backend: PlanBackend) -> None:
    """Not "backend ... has no op replay": the output that keeps the call on the full path."""
    backend.register(
        "tests_plan_states",
        tf.OpSpec(
            name=PAIR,
            signature=tf.Signature(
                inputs=("x",), outputs=("copy", "empty"), shape_rule=lambda x: (x, (0,))
            ),
            reference=lambda x: x,
            variants={"dsl": _copy_and_empty},
        ),
    )
    x = backend.tensor("float32", (5,))
    for _ in range(3):
        copy, empty = backend.host.run(PAIR, x)
    assert copy.download().tolist() == x.download().tolist() and empty.shape == (0,)
    (state,) = backend.host.op(PAIR).plans().values()
    assert state == (
        "full path: its output of shape (0,) is empty (a replay allocates no empty output)"
    )


def test_no_plan_when_switched_off(backend: PlanBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_op_plan, "ENABLED", False)
    a = backend.tensor("float32", (40,))
    handle = backend.host.op(ADD)
    handle.forget_plans()
    for _ in range(4):
        backend.host.run(ADD, a, a)
    assert handle.plans() == {}


def test_plans_are_bounded_per_handle(backend: PlanBackend) -> None:
    for n in range(1, _plan_table.MAX_PLANS + 8):
        a = backend.tensor("float32", (n,))
        backend.host.run(ADD, a, a)
    assert len(backend.host.op(ADD).plans()) <= _plan_table.MAX_PLANS

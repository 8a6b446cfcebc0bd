"""What ``handle.plans()`` says of calls through the CPU's own seam (``ex.launch``): the real
reason a call stays on the full path (an empty output, no outputs), not "no op replay", and an
attribute whose equality raises gets the full path's error. What every backend's plans say:
tests/provider/test_plan_states.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.provider import _op_plan

PAIR = "tests_plan_states.sum_and_empty"
NONE = "tests_plan_states.in_place"


def _sum_and_empty(ex: Any, a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``a + b`` and an empty second output: recorded through the seam, not replayable."""
    out, empty = ex.alloc_output(a.dtype, a.shape), ex.alloc_output(a.dtype, (0,))
    ex.launch(np.add, a, b, out=out)
    return out, empty


def _in_place(ex: Any, a: tf.Tensor, b: tf.Tensor) -> tuple[()]:
    """``a += b``: it writes an input and allocates nothing."""
    ex.launch(np.add, a, b, out=a)
    return ()


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> tf.Host:
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    host = tf.Host()
    view = host.registry.staging("tests_plan_states")
    for name, variant, outputs in ((PAIR, _sum_and_empty, ("sum", "empty")), (NONE, _in_place, ())):
        view.add_op(
            tf.OpSpec(
                name=name,
                signature=tf.Signature(
                    inputs=("a", "b"),
                    outputs=outputs,
                    shape_rule=(lambda a, b: (a, (0,))) if outputs else "same",
                ),
                reference=lambda a, b: a + b,
                variants={"cpu": variant},
            )
        )
    view.commit()
    return host


def test_an_empty_output_of_ex_launch_is_the_reason_given(host: tf.Host) -> None:
    """The CPU's own seam (``ex.alloc_output``, ``ex.launch``); a DSL op's on every backend:
    tests/provider/test_plan_states.py."""
    cpu = host.backend("cpu")
    a, b = cpu.upload(np.ones(3, np.float32)), cpu.upload(np.full(3, 2, np.float32))
    for _ in range(3):
        total, empty = host.run(PAIR, a, b)
    assert total.download().tolist() == [3.0, 3.0, 3.0] and empty.shape == (0,)
    (state,) = host.op(PAIR).plans().values()
    assert state == (
        "full path: its output of shape (0,) is empty (a replay allocates no empty output)"
    )


def test_no_outputs_is_the_reason_given(host: tf.Host) -> None:
    cpu = host.backend("cpu")
    a, b = cpu.upload(np.zeros(3, np.float32)), cpu.upload(np.ones(3, np.float32))
    for _ in range(3):
        assert host.run(NONE, a, b) == ()
    assert a.download().tolist() == [3.0, 3.0, 3.0]
    (state,) = host.op(NONE).plans().values()
    assert state.startswith("full path: it allocated no outputs"), state


def test_an_attribute_whose_equality_raises_gets_the_full_paths_error(
    host: tf.Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last replayed key is compared before a lookup: an array where a float is declared
    makes that comparison raise, and the call still gets the full path's typed error."""
    name = "tests_plan_states.scale"
    view = host.registry.staging("tests_plan_states_scale")

    def scale(ex: Any, x: tf.Tensor, factor: float = 1.0) -> tf.Tensor:
        out = ex.alloc_output(x.dtype, x.shape)
        ex.launch(np.multiply, x, factor, out=out)
        return out

    view.add_op(
        tf.OpSpec(
            name=name,
            signature=tf.Signature(inputs=("x",), attributes={"factor": float}),
            reference=lambda x, factor=1.0: x * factor,
            variants={"cpu": scale},
        )
    )
    view.commit()
    x = host.backend("cpu").upload(np.ones(3, np.float32))
    for _ in range(3):
        assert host.run(name, x, factor=2.0).download().tolist() == [2.0, 2.0, 2.0]
    assert list(host.op(name).plans().values()) == ["replay"]
    errors = []
    for planned in (True, False):
        monkeypatch.setattr(_op_plan, "ENABLED", planned)
        with pytest.raises(tf.ValidationError) as info:
            host.run(name, x, factor=np.full(3, 2.0))
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "declared float, got ndarray" in errors[0]

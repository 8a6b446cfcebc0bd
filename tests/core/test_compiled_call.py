"""The compiled planned call (``provider/_ccall.c``) against its reference, the Python path.

Both paths run in one process: ``_op_handle.CALL`` set to None is the pure-Python call (what
``TENFERRO_COMPILED_CALL=0`` or a source install without a compiler gives). The key of every
call must be the Python key, and every call the same result or the same error (type and
message), for random dtypes, shapes, views, aliasing and attributes; a planned call costs at
most four Python calls. ``scripts/test`` runs the op-call tests again with the switch off.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.call_budget import call_trace

import tenferro_host as tf
from tenferro_host import _op_handle
from tenferro_host.provider import _compiled, _op_plan
from tenferro_host.provider._plan_table import Learning, PlanTable

ADD = "ext_add_kernel.add"
COMPILED = os.environ.get(_compiled.SWITCH) != "0"
needs_compiled = pytest.mark.skipif(not COMPILED, reason=f"{_compiled.SWITCH}=0: pure Python")


@pytest.fixture(autouse=True)
def plans_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_op_plan, "ENABLED", True)


def test_the_state_says_which_call_runs():
    if COMPILED:  # scripts/setup builds the extension: a checkout without it is set up wrong
        assert _compiled.STATE == "compiled" and _compiled.CALL is not None
    else:
        assert _compiled.CALL is None and f"{_compiled.SWITCH}=0" in _compiled.STATE


def _hatch_build() -> Any:
    path = Path(__file__).resolve().parents[2] / "hatch_build.py"
    spec = importlib.util.spec_from_file_location("hatch_build_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_build_without_a_compiler_says_why_and_raises_nothing(tmp_path, monkeypatch):
    build = _hatch_build()
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    why = build.compile_extension(tmp_path / "out.so")
    assert (
        why is not None and why.startswith("no C compiler") and not (tmp_path / "out.so").exists()
    )


# -- the key ---------------------------------------------------------------------------------

scalars = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1, True, False, 0, None, "x"]),
    st.integers(-3, 3),
)
attr_values = st.recursive(scalars, lambda inner: st.tuples(inner, inner), max_leaves=4) | st.just(
    [1]  # unhashable
)
DTYPES = (np.float32, np.float64, np.int32)


@st.composite
def calls(draw: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    cpu = tf.Host().backend("cpu")
    n = draw(st.integers(1, 3))
    base = [cpu.upload(np.arange(12, dtype=draw(st.sampled_from(DTYPES)))) for _ in range(n)]
    tensors: list[Any] = []
    for i in range(n):
        t = base[draw(st.integers(0, i))]  # aliasing: an earlier input's storage again
        how = draw(st.sampled_from(["whole", "offset", "stepped", "matrix"]))
        if how == "offset":
            t = tf.Tensor(t.storage, t.dtype, (5,), (1,), 3)
        elif how == "stepped":
            t = tf.Tensor(t.storage, t.dtype, (6,), (2,), 0)
        elif how == "matrix":
            t = tf.Tensor(t.storage, t.dtype, (3, 4), (1, 3), 0)
        tensors.append(t)
    if draw(st.booleans()) and n == 1:
        tensors.append(np.zeros(2))  # not a Tensor: never keyed
    names = draw(st.lists(st.sampled_from(["alpha", "axis", "mode"]), unique=True, max_size=3))
    return tuple(tensors), {name: draw(attr_values) for name in names}


@needs_compiled
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_the_compiled_key_and_lookup_are_the_python_ones(call: Any):
    tensors, attrs = call
    python, compiled = PlanTable(), PlanTable()
    key, state = python.find(tensors, attrs)
    ckey, cstate = _compiled.FIND(compiled, tensors, attrs)
    assert ckey == key and state is cstate
    if key is None:
        return
    assert [type(x) for x in ckey] == [type(x) for x in key]  # -0.0/0.0, True/1, 1/1.0 apart
    planned = object()
    for table in (python, compiled):
        try:
            table[key] = planned
        except TypeError:  # unhashable: the state says so
            assert state is not None and type(state) is Learning
            return
    assert python.find(tensors, attrs)[1] is planned is _compiled.FIND(compiled, tensors, attrs)[1]
    assert compiled.hot == python.hot  # the last replayed key, compared first next time
    assert _compiled.FIND(compiled, tensors, attrs)[1] is planned  # (from the hot pair)


@needs_compiled
def test_equal_values_of_other_kinds_are_other_keys():
    cpu = tf.Host().backend("cpu")
    x = (cpu.upload(np.ones(2, np.float32)),)
    keys = [
        _compiled.FIND(PlanTable(), x, {"a": v})[0] for v in (0.0, -0.0, 0, False, (0,), (0.0,))
    ]
    assert len(set(keys)) == len(keys)


# -- both paths, same results and errors --------------------------------------------------------


def _outcome(fn: Any) -> Any:
    try:
        out = fn()
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    outs = out if type(out) is tuple else (out,)
    return [(t.dtype, t.shape, t.strides, t.download().tobytes()) for t in outs]


@st.composite
def add_calls(draw: Any) -> tuple[Any, ...]:
    dtype = draw(st.sampled_from([*DTYPES, np.float16]))
    other = draw(st.sampled_from([dtype, dtype, np.float64]))  # mostly alike: planned calls
    shape = draw(st.sampled_from([(8,), (2, 3), (3, 2, 2)]))
    how = draw(st.sampled_from(["compact", "offset", "transposed", "same", "read-only"]))
    attrs = draw(st.sampled_from([{}, {}, {"alpha": 1.0}]))
    return dtype, other, shape, how, attrs


def _inputs(cpu: Any, dtype: Any, other: Any, shape: Any, how: str) -> tuple[Any, ...]:
    n = math.prod(shape)
    a = cpu.upload(np.arange(n, dtype=dtype).reshape(shape))
    b = cpu.upload(np.full(shape, 3, dtype=other))
    if how == "offset":
        big = cpu.upload(np.arange(n + 2, dtype=dtype))
        a = tf.Tensor(big.storage, big.dtype, shape, a.strides, 2)
    elif how == "transposed" and len(shape) > 1:
        a = cpu.upload(np.arange(n, dtype=dtype).reshape(shape[::-1])).transpose()
        b = cpu.upload(np.ones(shape[::-1], dtype=other)).transpose()
    elif how == "same":
        b = a
    elif how == "read-only":
        frozen = np.arange(n, dtype=dtype).reshape(shape)
        frozen.flags.writeable = False
        a = cpu.from_dlpack(frozen)
    return a, b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(add_calls())
def test_both_paths_give_the_same_results_and_errors(case: Any):
    dtype, other, shape, how, attrs = case
    outcomes = []
    try:
        for call in (_compiled.CALL, None):  # (a hypothesis test takes no function fixture)
            _op_handle.CALL = call
            host = tf.Host()
            cpu = host.backend("cpu")
            a, b = _inputs(cpu, dtype, other, shape, how)
            run = partial(host.run, ADD, a, b, **attrs)
            outcomes.append([_outcome(run) for _ in range(4)])
    finally:
        _op_handle.CALL = _compiled.CALL
    assert outcomes[0] == outcomes[1]


# -- what a planned call costs, and what it survives ---------------------------------------------


def _planned(monkeypatch: pytest.MonkeyPatch) -> tuple[tf.Host, Any, Any, Any]:
    """A host whose CPU add of two 1k float32 tensors is planned: (host, handle, a, b)."""
    host = tf.Host()
    cpu = host.backend("cpu")
    # the test kit's poisoned fresh memory (on in this suite) takes the runtime's allocation
    monkeypatch.setattr(type(cpu), "poison_fresh_memory", False)
    a, b = cpu.upload(np.ones(1024, np.float32)), cpu.upload(np.ones(1024, np.float32))
    handle = host.op(ADD)
    for _ in range(3):
        host.run(ADD, a, b)
    assert list(handle.plans().values()) == ["replay"]  # (built with the extension: its core)
    return host, handle, a, b


def _python_files(call: Any) -> set[str]:
    return set(call_trace(call, __file__)[0])


@needs_compiled
def test_a_planned_cpu_call_runs_no_python_frame(monkeypatch):
    """``host.run`` and the handle's ``__call__`` are compiled methods: a planned call with
    tensors only enters no Python function (the Python methods stay the reference)."""
    host, handle, a, b = _planned(monkeypatch)
    assert _python_files(lambda: host.run(ADD, a, b)) == set()
    assert _python_files(lambda: handle(a, b)) == set()
    assert type(tf.Host.__dict__["run"]).__name__ == "method_descriptor"


#: A call the compiled methods hand to the Python method: how to make it, and the file whose
#: Python method then runs (host.run's or the handle's).
PYTHON_ROADS = {
    "host.run(backend=)": (
        lambda host, handle, a, b: host.run(ADD, a, b, backend="cpu"),
        "_host.py",
    ),
    "handle(backend=)": (lambda host, handle, a, b: handle(a, b, backend="cpu"), "_op_handle.py"),
    "a replaced record": (lambda host, handle, a, b: host.run(ADD, a, b), "_host.py"),
    "plans off": (lambda host, handle, a, b: handle(a, b), "_op_handle.py"),
    "the compiled call off": (lambda host, handle, a, b: host.run(ADD, a, b), "_host.py"),
}


@needs_compiled
@pytest.mark.parametrize("road", PYTHON_ROADS)
def test_what_the_compiled_methods_do_not_replay_runs_the_python_method(road, monkeypatch):
    host, handle, a, b = _planned(monkeypatch)
    if road == "a replaced record":  # as after a later registration of the op: a new handle
        monkeypatch.setattr(handle, "record", object())
    elif road == "plans off":
        monkeypatch.setattr(_op_plan, "ENABLED", False)
    elif road == "the compiled call off":
        monkeypatch.setattr(_op_handle, "CALL", None)
    call, python_file = PYTHON_ROADS[road]
    seen: list[Any] = []
    files = _python_files(lambda: seen.append(call(host, handle, a, b)))
    assert any(f.endswith(python_file) for f in files)
    np.testing.assert_array_equal(seen[0].download(), np.full(1024, 2, np.float32))
    if road == "a replaced record":
        assert host._handles[ADD] is not handle


@needs_compiled
def test_a_replay_miss_takes_the_full_path_once(monkeypatch):
    """A replay that answers REPLAY_MISS (its guard refused) runs once, then the full path."""
    host, handle, a, b = _planned(monkeypatch)
    (key,) = handle._plans
    misses: list[Any] = []
    handle._plans[key] = lambda tensors: misses.append(tensors) or _op_plan.REPLAY_MISS
    handle._plans.hot = ((), None)
    for call in (lambda: host.run(ADD, a, b), lambda: handle(a, b)):
        np.testing.assert_array_equal(call().download(), np.full(1024, 2, np.float32))
    assert misses == [(a, b), (a, b)]


#: Wrong calls of host.run: the compiled method raises what the Python one raises.
WRONG_CALLS = {
    "a name that is not a string": lambda host, a, b: host.run(7, a, b),
    "an unhashable name": lambda host, a, b: host.run(["add"], a, b),
    "an unknown op": lambda host, a, b: host.run("no.such_op", a, b),
    "an unknown attribute": lambda host, a, b: host.run(ADD, a, b, alpha=1.0),
}


@needs_compiled
@pytest.mark.parametrize("wrong", WRONG_CALLS)
def test_a_wrong_call_is_the_python_methods_error(wrong, monkeypatch):
    host, _, a, b = _planned(monkeypatch)
    with pytest.raises(tf.ValidationError) as compiled:
        WRONG_CALLS[wrong](host, a, b)
    monkeypatch.setattr(tf.Host, "run", _compiled.PYTHON_METHODS[tf.Host, "run"])
    with pytest.raises(tf.ValidationError) as python:
        WRONG_CALLS[wrong](host, a, b)
    assert str(compiled.value) == str(python.value)


def test_a_device_storage_queues_its_release_when_it_dies(monkeypatch):
    """``DeviceStorage.__del__`` (compiled where the extension is, else Python): one append of
    its release; nothing for a storage without one; an error (a runtime without its queue, as
    at interpreter shutdown) is dropped, not reported."""
    from tenferro_host.provider import DeviceStorage
    from tenferro_host.provider._deferred import DeferredReleases

    assert (type(DeviceStorage.__dict__["__del__"]).__name__ == "method_descriptor") is COMPILED
    runtime = type("R", (), {})()
    runtime.domain, runtime.deferred = object(), DeferredReleases()
    DeviceStorage(runtime, 8, ("memory", 0xA000))
    DeviceStorage(runtime, 0, None)
    assert list(runtime.deferred) == [("memory", 0xA000)]
    del runtime.deferred
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    DeviceStorage(runtime, 8, ("memory", 0xB000))
    assert unraisable == []

"""Op plans on the CPU backend: a call recorded through ``ex.alloc_output`` and ``ex.launch``
replays its launches without the variant, and gives what the full path gives — the same output
bytes and layout, the same writes into its inputs, the same typed error — for random shapes,
dtypes, views and aliasing; anything the seam cannot vouch for stays on the full path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ext_add_kernel import dsl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.op_registration import register_ops

import tenferro_host as tf
from tenferro_host.cpu import CpuRuntime
from tenferro_host.provider import _op_plan

ADD = "ext_add_kernel.add"
ACC, SCALE, DIVMOD, AXPY, BARE, DSL, ECHO = (
    f"tests_cpu_plan.{n}" for n in ("acc", "scale", "divmod", "axpy", "bare", "dsl", "echo")
)
#: variant calls per op: a replayed call does not call its variant
CALLS: dict[str, int] = {}


def _counted(name: str, fn: Any) -> Any:
    def variant(ex: Any, *args: Any, **attrs: Any) -> Any:
        CALLS[name] = CALLS.get(name, 0) + 1
        return fn(ex, *args, **attrs)

    return variant


def _accumulate(ex: Any, acc: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """``out = acc + x`` and ``acc += x``: an input written beside an output."""
    out = ex.alloc_output(acc.dtype, acc.shape)
    ex.launch(np.add, acc, x, out=out)
    ex.launch(np.add, acc, x, out=acc)
    return out


def _scale(ex: Any, x: tf.Tensor, factor: float = 1.0) -> tf.Tensor:
    """A constant and a keyword (``casting``) beside the tensors."""
    out = ex.alloc_output(x.dtype, x.shape)
    ex.launch(np.multiply, x, factor, out=out, casting="unsafe")
    return out


def _divmod(ex: Any, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Two outputs of one ufunc (``out`` a tuple)."""
    q, r = ex.alloc_output(x.dtype, x.shape), ex.alloc_output(x.dtype, x.shape)
    ex.launch(np.divmod, x, y, out=(q, r))
    return q, r


def _axpy_numpy(x: np.ndarray, y: np.ndarray, *, out: np.ndarray, alpha: float) -> None:
    np.multiply(x, alpha, out=out)
    out += y


def _axpy(ex: Any, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """A function that is not a ufunc: its views are fresh views, never the storage arrays."""
    out = ex.alloc_output(x.dtype, x.shape)
    ex.launch(_axpy_numpy, x, y, out=out, alpha=2.0)
    return out


def _echo(ex: Any, x: tf.Tensor, value: Any = 0) -> tf.Tensor:
    """``x`` plus a constant that says exactly which ``value`` recorded the launch (its repr
    tells ``-0.0`` from ``0.0``, ``True`` from ``1``, ``1`` from ``1.0``)."""
    out = ex.alloc_output(x.dtype, x.shape)
    ex.launch(np.add, x, float(sum(map(ord, repr(value)))), out=out)
    return out


def _bare(ex: Any, x: tf.Tensor) -> tf.Tensor:
    """Numpy on strided_view: works, and never planned (its memory is outside the seam)."""
    out = ex.runtime.empty(x.dtype, x.shape)
    np.negative(CpuRuntime.strided_view(x), out=CpuRuntime.strided_view(out))
    return out


@pytest.fixture(scope="module")
def host() -> tf.Host:
    host = tf.Host()
    view = host.registry.staging("tests_cpu_plan")
    ops = {
        ACC: (("acc", "x"), {}, ("out",), _accumulate),
        SCALE: (("x",), {"factor": float}, ("out",), _scale),
        DIVMOD: (("x", "y"), {}, ("q", "r"), _divmod),
        AXPY: (("x", "y"), {}, ("out",), _axpy),
        BARE: (("x",), {}, ("out",), _bare),
        DSL: (("lhs", "rhs"), {}, ("out",), dsl.add),  # the interpreter, through ex.jit
        ECHO: (("x",), {"value": object}, ("out",), _echo),
    }
    for name, (inputs, attributes, outputs, fn) in ops.items():
        view.add_op(
            tf.OpSpec(
                name=name,
                signature=tf.Signature(inputs=inputs, attributes=attributes, outputs=outputs),
                reference=lambda *a, **k: a[0],
                variants={"dsl" if name == DSL else "cpu": _counted(name, fn)},
            )
        )
    view.commit()
    return host


@pytest.fixture(autouse=True)
def plans_on(monkeypatch):
    """These tests are about plans: on, whatever TENFERRO_OP_PLAN says (both paths compared)."""
    monkeypatch.setattr(_op_plan, "ENABLED", True)


DTYPES = ("float32", "float64", "int32", "int64", "float16", "complex64")
VIEWS = ("whole", "prefix", "offset", "transpose", "step", "read-only")


def _tensor(cpu: Any, values: np.ndarray, view: str) -> tf.Tensor:
    """``values`` as a tensor made the way ``view`` says (its contents are ``values``)."""
    if view == "prefix":  # shape, strides and offset of a whole tensor, a longer storage
        flat = values.reshape(-1, order="F")
        big = cpu.upload(np.concatenate([flat, flat[:1]]))[: flat.size]
        return big if values.ndim == 1 else cpu.upload(values)
    if view == "offset":
        pad = np.concatenate([values[..., :1], values], axis=-1)
        return cpu.upload(pad)[(slice(None),) * (values.ndim - 1) + (slice(1, None),)]
    if view == "transpose" and values.ndim == 2:
        return cpu.upload(np.ascontiguousarray(values.T)).transpose()
    if view == "step":
        doubled = np.repeat(values, 2, axis=0)
        return cpu.upload(doubled)[::2]
    if view == "read-only":
        frozen = np.asfortranarray(values)
        frozen.flags.writeable = False
        return cpu.from_dlpack(frozen)
    return cpu.upload(values)


@st.composite
def calls(draw: Any) -> tuple[str, list[tuple[np.ndarray, str]], dict[str, Any], bool]:
    """(op, [(values, view)] per input, attributes, warm): random, often wrong on purpose;
    ``warm``: the calls before the last one pass whole tensors (the same key for a prefix view
    or a read-only import: the last call replays a plan recorded on other storage)."""
    name = draw(st.sampled_from([ADD, ACC, SCALE, DIVMOD, AXPY, BARE, DSL]))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    dt = draw(st.sampled_from(DTYPES))
    arity = 1 if name in (SCALE, BARE) else 2
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = []
    for i in range(arity):
        dti = dt if i == 0 or draw(st.integers(0, 4)) else draw(st.sampled_from(DTYPES))
        shi = shape if i == 0 or draw(st.integers(0, 4)) else (*shape, 2)
        values = (rng.standard_normal(shi) * 8 + 1).astype(dti)
        values[values == 0] = 1  # divmod's divisor
        inputs.append((values, draw(st.sampled_from(VIEWS))))
    if arity == 2 and draw(st.integers(0, 3)) == 0:
        inputs[1] = inputs[0]  # aliased: one tensor passed twice
    attrs = {"factor": draw(st.sampled_from([2.0, -0.0, 3]))} if name == SCALE else {}
    return name, inputs, attrs, draw(st.booleans())


def _observe(host: tf.Host, planned: bool, call: Any, times: int) -> Any:
    """What the last of ``times`` calls on fresh tensors made of ``call`` gave: the error, or
    every output's and input's layout and bytes; and whether that call ran its variant."""
    name, inputs, attrs, warm = call
    cpu = host.backend("cpu")
    saved, _op_plan.ENABLED = _op_plan.ENABLED, planned
    try:
        for n in range(times):
            tensors: list[Any] = []
            for k, (values, view) in enumerate(inputs):
                same = next((j for j in range(k) if inputs[j] is inputs[k]), None)
                if same is not None:
                    tensors.append(tensors[same])
                else:
                    tensors.append(
                        _tensor(cpu, values, "whole" if warm and n < times - 1 else view)
                    )
            before = CALLS.get(name, 0)
            try:
                result = host.run(name, *tensors, **attrs)
            except tf.TenferroError as exc:
                return ("raised", type(exc).__name__, str(exc)), CALLS.get(name, 0) > before
    finally:
        _op_plan.ENABLED = saved
    outs = result if isinstance(result, tuple) else (result,)
    seen = [(t.dtype.name, t.shape, t.strides, t.download().tobytes()) for t in (*outs, *tensors)]
    return ("ran", seen), CALLS.get(name, 0) > before


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(call=calls())
def test_plan_and_full_path_give_the_same_results_and_errors(host, call):
    full, _ = _observe(host, False, call, 1)
    planned, ran_variant = _observe(host, True, call, 3)
    assert planned == full
    name, inputs, _, warm = call
    if full[0] == "ran" and name not in (BARE, DSL) and not warm:
        replayable = name != ACC or inputs[0][1] != "read-only"
        assert ran_variant is not replayable  # the third call replayed, not the variant


#: (a bool alone is refused where a bool is not declared; inside a tuple it is not)
EQUAL_BUT_NOT_SAME = [
    (0.0, -0.0),
    (1, 1.0),
    ((1,), (True,)),
    ((0.0, 2), (-0.0, 2)),
    ((1, (2,)), (1, (2.0,))),
]


@pytest.mark.parametrize(("first", "then"), EQUAL_BUT_NOT_SAME)
def test_a_plan_is_keyed_by_attribute_values_that_compare_equal_but_are_not_the_same(
    host, first, then
):
    x = host.backend("cpu").upload(np.zeros(2, np.float64))
    for _ in range(3):  # planned for ``first``
        host.run(ECHO, x, value=first)
    assert "replay" in host.op(ECHO).plans().values()
    got = host.run(ECHO, x, value=then).download()
    assert got.tolist() == [float(sum(map(ord, repr(then))))] * 2
    assert got.tolist() != host.run(ECHO, x, value=first).download().tolist()


def test_every_nan_is_one_key_so_a_nan_attribute_is_planned(host):
    x = host.backend("cpu").upload(np.zeros(2, np.float64))
    handle = host.op(ECHO)
    before = len(handle.plans())
    for _ in range(4):
        host.run(ECHO, x, value=float("nan"))  # a new NaN object each call: none equals another
    assert len(handle.plans()) == before + 1 and "replay" in handle.plans().values()


def test_a_dsl_op_on_the_cpu_is_replayed(host):
    """The interpreter's launch is recorded like ``ex.launch``: the third call runs the kernel
    without its variant; a non-compact input (canonicalized: a counted copy) is not planned."""
    cpu = host.backend("cpu")
    a = cpu.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
    for _ in range(3):
        before = CALLS.get(DSL, 0)
        out = host.run(DSL, a, a)
    assert CALLS[DSL] == before and out.download().tolist() == (a.download() * 2).tolist()
    t, before = a.transpose(), CALLS[DSL]
    for _ in range(4):
        assert host.run(DSL, t, t).download().tolist() == (t.download() * 2).tolist()
    assert CALLS[DSL] == before + 4  # every call ran its variant


def test_a_whole_tensor_plan_replays_a_prefix_view_right(host):
    """Shape, strides and offset of ``big[:8]`` are those of a whole 8-element tensor: the same
    key, but its storage is longer, so the replay makes a view instead of using the array."""
    cpu = host.backend("cpu")
    a = cpu.upload(np.arange(8, dtype=np.float64))
    for _ in range(3):
        host.run(ADD, a, a)
    big = cpu.upload(np.arange(9, dtype=np.float64) * 10)
    assert host.run(ADD, big[:8], big[:8]).download().tolist() == [20.0 * i for i in range(8)]


def test_why_a_call_stays_on_the_full_path(host):
    cpu = host.backend("cpu")
    x = cpu.upload(np.ones(4, np.float32))
    for _ in range(4):
        host.run(BARE, x)
    states = host.op(BARE).plans().values()
    assert states and all(s.startswith("full path") and "strided_view" in s for s in states)
    empty = cpu.upload(np.ones(0, np.float32))
    for _ in range(4):
        host.run(ADD, empty, empty)
    assert any("launched nothing" in s for s in host.op(ADD).plans().values())


def test_a_read_only_input_the_call_writes_takes_the_full_path_and_its_error(host):
    cpu = host.backend("cpu")
    acc, x = cpu.upload(np.ones(6, np.float32)), cpu.upload(np.ones(6, np.float32))
    for _ in range(3):
        host.run(ACC, acc, x)
    assert acc.download().tolist() == [4.0] * 6
    frozen = np.ones(6, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(tf.ValidationError, match="read-only"):
        host.run(ACC, cpu.from_dlpack(frozen), x)
    assert frozen.tolist() == [1.0] * 6


def test_a_launch_that_raises_is_typed(host):
    """A keyword numpy refuses: its error comes back as a LaunchError naming the function."""

    def wrong(ex: Any, x: tf.Tensor) -> tf.Tensor:
        out = ex.alloc_output(x.dtype, x.shape)
        ex.launch(np.add, x, np.float32(1), out=out, casting="bogus")
        return out

    register_ops(host, "tests_cpu_plan_wrong", "cpu", {"tests_cpu_plan_wrong.add1": wrong})
    x = host.backend("cpu").upload(np.ones(4, np.float32))
    for _ in range(4):
        with pytest.raises(tf.LaunchError, match=r"ex.launch\(add"):
            host.run("tests_cpu_plan_wrong.add1", x)


def test_launch_refuses_what_it_cannot_run(host):
    cpu = host.backend("cpu")
    x = cpu.upload(np.ones(3, np.float32))
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    with cpu.session() as s:
        ex = tf.cpu.exec_session(s)
        with pytest.raises(tf.ValidationError, match="callable"):
            ex.launch("np.add", x, x, out=x)
        with pytest.raises(tf.ValidationError, match="at least one output"):
            ex.launch(np.add, x, x, out=())
        with pytest.raises(tf.ValidationError, match="read-only"):
            ex.launch(np.add, x, x, out=cpu.from_dlpack(frozen))
        with pytest.raises(tf.ValidationError, match="must be a tenferro_host"):
            ex.launch(np.add, x, x, out=[x])
    with pytest.raises(tf.SessionClosedError):
        ex.launch(np.add, x, x, out=x)


def _prepared(host: tf.Host, op: str, *arrays: np.ndarray, **attrs: Any) -> Any:
    """The op's plan for inputs of ``arrays``' layouts borrowed (as a framework bridge keys
    them), after three calls on uploads of them."""
    cpu = host.backend("cpu")
    tensors = [cpu.upload(a) for a in arrays]
    for _ in range(3):
        host.run(op, *tensors, **attrs)
    key: tuple[Any, ...] = ()
    for t in tensors:
        key += (t.dtype, t.shape, t.strides, 0, cpu)
    return host.op(op).prepared(key, attrs)


def test_a_cpu_plan_launches_on_a_frameworks_arrays(host):
    """``launch_buffers`` on the CPU (a bridge's prepared call): the plan's ufunc launches on
    numpy arrays in the tensors' layouts, into the caller's output; a plan with a launch that
    is not a plain ufunc (the DSL interpreter, a named output) answers False, for the call's
    own path; a launch that fails raises its typed error."""
    x, y = np.arange(5, dtype=np.float32), np.full(5, 2, np.float32)
    plan = _prepared(host, ADD, x, y)
    out = np.empty(5, np.float32)
    assert plan.launch_buffers((x, y), (out,)) is True and out.tolist() == (x + y).tolist()
    with pytest.raises(tf.LaunchError):  # numpy refuses the shapes: the launch's typed error
        plan.launch_buffers((x, np.ones(3, np.float32)), (out,))
    for op, attrs in ((DSL, {}), (SCALE, {"factor": 2.0})):
        other = _prepared(host, op, *((x, y) if op == DSL else (x,)), **attrs)
        assert other is not None and other.launch_buffers((x, y), (out,)) is False

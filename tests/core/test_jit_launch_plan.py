"""A jit session's launch plan: a launch whose key came before replays what the full path
recorded, on every backend with a DSL session, and answers exactly as the full path does.

The key is the kernel, the count and dim (ints only), each argument's dtype, shape, strides,
offset and runtime or its exact value and type, which arguments share a storage, and the
constants. A launch is recorded the second time its key comes and replayed from the third on.
Each test runs with plans (the default) and, in the suite's second pass, with
``TENFERRO_OP_PLAN=0``, where nothing is planned and the same answers come from the full path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.call_budget import calls_per_op
from support.kernels import saxpy

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host._cpu import CpuRuntime
from tenferro_host.benchmarks.kernels import DSL_OP, register_dsl_op
from tenferro_host.errors import (
    DTypeError,
    ForeignRuntimeError,
    InvalidLaunchConfigError,
    SessionClosedError,
    ValidationError,
)
from tenferro_host.provider import OpReplay, _op_plan

#: Calls of the README's jit block on the CPU (``with ex.jit(op) as js``, ``alloc_output``,
#: ``cube_count_1d``, ``cube_dim_1d``, a planned ``launch``, the exit), the interpreter's run of
#: the kernel left out (it is the kernel's work, as the GPU's is on the other backends): 40 with
#: plans (the target); on the full path 191, whatever ran before (179 or 183 while pstats merged
#: the methods every dataclass generates into one key and kept whichever it met last).
README_BLOCK_PLANNED, README_BLOCK_FULL_PATH = 40, 191


@K.kernel
def fill(out: K.Array[K.f32], value: K.f32):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = value


@pytest.fixture
def rt(each_rt: Any) -> Any:
    """A runtime of each backend, of its own (a fresh Host's: its launch plans start empty)."""
    return each_rt


def _plans(rt: Any) -> list[OpReplay]:
    """The runtime's planned launches (its ``op_replay`` of each launch's recording)."""
    return [p for p in rt.launch_plans.values() if isinstance(p, OpReplay)]


def _saxpy(rt: Any, x: Any, y: Any, a: Any, count: Any = None) -> Any:
    """The README's block: a jit session, an output, one launch."""
    with rt.session() as s, s.exec_session().jit("tests.launch_plan") as js:
        out = js.alloc_output(tf.float32, x.shape)
        js.launch(saxpy, count or js.cube_count_1d(x.numel), js.cube_dim_1d(), out, x, y, a)
    return out


def test_a_repeated_launch_is_planned_and_gives_the_full_paths_results(rt: Any) -> None:
    xs = [np.arange(1000, dtype=np.float32) * k for k in range(5)]
    y = rt.upload(np.ones(1000, np.float32))
    for k, x in enumerate(xs):
        out = _saxpy(rt, rt.upload(x), y, 2.0)
        np.testing.assert_array_equal(out.download(), 2 * x + 1, err_msg=f"launch {k}")
    assert len(_plans(rt)) == (1 if _op_plan.ENABLED else 0)


def test_scalars_that_compare_equal_are_different_keys(rt: Any) -> None:
    """-0.0 is not 0.0 and 3 is not 3.0 nor True: each is launched with its own value."""
    for value in (0.0, 0.0, 0.0, -0.0, -0.0, 3, 3, 3.0, 3.0, 1.0, 1.0, 1, 1):
        with rt.session() as s, s.exec_session().jit("tests.launch_plan") as js:
            out = js.alloc_output(tf.float32, (64,))
            js.launch(fill, js.cube_count_1d(64), js.cube_dim_1d(), out, value)
        got = out.download()
        assert (got == value).all() and np.signbit(got).all() == np.signbit(value), value
    with (
        rt.session() as s,
        s.exec_session().jit("tests.launch_plan") as js,
        pytest.raises(DTypeError, match="not a bool"),
    ):
        out = js.alloc_output(tf.float32, (64,))
        js.launch(fill, js.cube_count_1d(64), js.cube_dim_1d(), out, True)


def test_bindings_and_numpy_scalars_are_planned_too(rt: Any) -> None:
    x = rt.upload(np.arange(256, dtype=np.float32))
    with rt.session() as s, s.exec_session().jit("tests.launch_plan") as js:
        out = js.alloc_output(tf.float32, (256,))
        bound = js.binding(out)
        for a in (np.float32(2), np.float32(2), np.float32(2), np.float32(-0.0)):
            js.launch(saxpy, js.cube_count_1d(256), js.cube_dim_1d(), bound, x, x, a)
            np.testing.assert_array_equal(out.download(), (a + 1) * np.arange(256))
        js.launch(fill, js.cube_count_1d(256), js.cube_dim_1d(), bound, np.float32(-0.0))
        js.launch(fill, js.cube_count_1d(256), js.cube_dim_1d(), bound, np.float32(-0.0))
        js.launch(fill, js.cube_count_1d(256), js.cube_dim_1d(), bound, np.float32(0.0))
        assert not np.signbit(out.download()).any()
    assert len(_plans(rt)) == (2 if _op_plan.ENABLED else 0)


def test_which_arguments_share_a_storage_is_part_of_the_key(rt: Any) -> None:
    x = rt.upload(np.arange(256, dtype=np.float32))
    y = rt.upload(np.full(256, 10, np.float32))
    for _ in range(3):
        same = _saxpy(rt, x, x, 1.0)  # x + x
    np.testing.assert_array_equal(same.download(), 2 * np.arange(256))
    for _ in range(3):
        other = _saxpy(rt, x, y, 1.0)  # the same layouts, another storage for y
    np.testing.assert_array_equal(other.download(), np.arange(256) + 10)


def test_a_planned_key_still_refuses_what_the_full_path_refuses(rt: Any) -> None:
    x = rt.upload(np.arange(256, dtype=np.float32))
    for _ in range(3):
        _saxpy(rt, x, x, 1.0, count=(1, 1, 1))
    with pytest.raises(InvalidLaunchConfigError, match="count"):
        _saxpy(rt, x, x, 1.0, count=(1.0, 1, 1))  # 1.0 == 1: not a key of an int count
    elsewhere = tf.Host().new_backend("cpu").upload(np.arange(256, dtype=np.float32))
    with pytest.raises(ForeignRuntimeError):
        _saxpy(rt, elsewhere, x, 1.0, count=(1, 1, 1))
    with rt.session() as s, s.exec_session().jit("tests.launch_plan") as js:
        pass
    with pytest.raises(SessionClosedError):
        js.launch(saxpy, (1, 1, 1), (256, 1, 1), x, x, x, 1.0)


def test_a_read_only_output_at_a_planned_key_is_refused() -> None:
    cpu = tf.Host().new_backend("cpu")
    out, x = cpu.zeros("float32", 64), cpu.upload(np.ones(64, np.float32))
    ro = np.zeros(64, np.float32)
    ro.setflags(write=False)
    borrowed = cpu.from_dlpack(ro)
    with cpu.session() as s, s.exec_session().jit("tests.launch_plan") as js:
        for _ in range(3):
            js.launch(saxpy, (1, 1, 1), (64, 1, 1), out, x, x, 1.0)
        with pytest.raises(ValidationError, match="read-only"):
            js.launch(saxpy, (1, 1, 1), (64, 1, 1), borrowed, x, x, 1.0)
    assert not ro.any() and (out.download() == 2).all()


def test_a_dsl_op_call_records_its_op_plan_not_a_launch_plan() -> None:
    """An op call's launch is recorded for the op's plan; no launch plan of its own is made."""
    host = tf.Host()
    register_dsl_op(host)
    cpu = host.new_backend("cpu")
    a = cpu.upload(np.arange(100, dtype=np.float32))
    for _ in range(4):
        out = host.run(DSL_OP, a, a)
    np.testing.assert_array_equal(out.download(), 2 * np.arange(100))
    assert ("replay" in host.op(DSL_OP).plans().values()) is _op_plan.ENABLED
    assert _plans(cpu) == []


def _two_launches(ex: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """t = 2x + y (the README block's launch), then out = t + y: both outputs returned."""
    with ex.jit("tests.two_launches") as js:
        t = js.alloc_output(tf.float32, x.shape)
        js.launch(saxpy, js.cube_count_1d(x.numel), js.cube_dim_1d(), t, x, y, 2.0)
        out = js.alloc_output(tf.float32, x.shape)
        js.launch(saxpy, js.cube_count_1d(x.numel), js.cube_dim_1d(), out, t, y, 1.0)
    return t, out


def test_a_planned_launch_inside_an_op_call_being_recorded_is_recorded_not_replayed(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch key the runtime planned from a user's jit block comes again inside an op call
    being recorded: the op's recording must hold both launches. Replayed unrecorded, the first
    would be left out of the op's plan (whose replay then reads an output nothing wrote); taken
    for a launch recording, the second would be missing too (the op never planned)."""
    monkeypatch.setattr(CpuRuntime, "poison_fresh_memory", True)  # an unwritten output shows
    host = rt.host
    view = host.registry.staging("tests-two-launches")
    view.add_op(
        tf.OpSpec(
            name="tests.two_launches",
            signature=tf.Signature(inputs=("x", "y"), outputs=("t", "out")),
            reference=lambda x, y: (2 * x + y, 2 * x + 2 * y),
            variants={"dsl": _two_launches},
        )
    )
    view.commit()
    x, y = rt.upload(np.arange(64, dtype=np.float32)), rt.upload(np.ones(64, np.float32))
    for _ in range(3):
        _saxpy(rt, x, y, 2.0)  # the key of the op's first launch, planned
    assert len(_plans(rt)) == (1 if _op_plan.ENABLED else 0)
    for _ in range(4):
        t, out = host.run("tests.two_launches", x, y)
        np.testing.assert_array_equal(t.download(), 2 * np.arange(64) + 1)
        np.testing.assert_array_equal(out.download(), 2 * np.arange(64) + 2)
    planned = "replay" in host.op("tests.two_launches").plans().values()
    assert planned is _op_plan.ENABLED


def test_the_readme_block_stays_within_its_call_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, never timed: the block's calls besides the interpreter's (a stand-in runs the
    kernel, so that what is counted is the session's own work)."""
    cpu = tf.Host().new_backend("cpu")
    x, y = cpu.upload(np.ones(1000, np.float32)), cpu.upload(np.ones(1000, np.float32))
    monkeypatch.setattr(CpuRuntime, "poison_fresh_memory", False)  # the test kit's, not a user's
    monkeypatch.setattr("tenferro_host._cpu._replay.run", lambda *args: None)
    monkeypatch.setattr("tenferro_host._cpu._jit.run", lambda *args: None)
    with cpu.session() as s:
        ex = s.exec_session()

        def block() -> None:
            with ex.jit("tests.launch_plan") as js:
                out = js.alloc_output(tf.float32, (1000,))
                js.launch(saxpy, js.cube_count_1d(1000), js.cube_dim_1d(), out, x, y, 2.0)

        for _ in range(3):
            block()
        # less the block's own call and the stand-in's (and the profiler's stop, 0.01 a block)
        calls = round(calls_per_op(block)) - 2
    print(f"{calls} calls per README block (the interpreter left out)")
    assert calls <= (README_BLOCK_PLANNED if _op_plan.ENABLED else README_BLOCK_FULL_PATH)

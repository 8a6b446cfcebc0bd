"""Op plans on CUDA, without a GPU (the driver and cuda.core's launch are recording stand-ins):
a replayed call launches what the full path launches, raises what it raises, and a plan is
only made for what it can replay. Every launch is normalized (kernel, grid, block, each
argument as a tensor and byte offset or a masked constant) so that both paths compare."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.driver_stand_in import (
    ADD,
    ADD_PARAMS,
    StandIn,
    launch_words,
    recording_driver,
    stand_in,
    stand_in_module,
)
from support.op_registration import register_op, register_ops
from support.plan_backends import CudaStandInBackend
from tenferro_host_cuda import _driver as driver

import tenferro_host as tf
from tenferro_host.benchmarks.cases import PLAN_STEPS, _plan_steps
from tenferro_host.cuda import raw
from tenferro_host.provider import _op_plan

ACC = "tests_plan.accumulate"


def _accumulate(ex: Any, acc: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """``out = acc + x`` and ``acc += x``: an exclusive borrow of an input beside an output."""
    with ex.raw(ACC) as rs:
        out = rs.alloc_output(acc.dtype, acc.shape)
        function = rs.resource((ACC, "module"), lambda: None).function("add_kernel")
        rs.launch(
            function,
            raw.LaunchConfig.flat(acc.numel, 256),
            [rs.tensor_mut(out), rs.tensor_mut(acc), rs.tensor(x), raw.i32(acc.numel)],
        )
        return out


class World(CudaStandInBackend):
    """The stand-in backend of the op-plan tests with the accumulate op (an exclusive input)."""

    def __init__(self, base: StandIn) -> None:
        super().__init__(base)
        base.rt.resources.get((ACC, "module"), lambda: self.module)
        accumulate = tf.OpSpec(
            name=ACC,
            signature=tf.Signature(inputs=("acc", "x")),
            reference=lambda acc, x: acc + x,
            variants={"cuda-raw": _accumulate},
        )
        register_op(base.host, "tests_plan", accumulate)


@pytest.fixture(autouse=True)
def plans_on(monkeypatch):
    """These tests are about plans: on, whatever TENFERRO_OP_PLAN says (both paths compared)."""
    monkeypatch.setattr(_op_plan, "ENABLED", True)


@pytest.fixture(scope="module")
def world():
    with stand_in() as base:
        yield World(base)


DTYPES = ("float32", "float64", "int32")


@st.composite
def operands(draw: Any, world: World) -> tuple[Any, Any]:
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    dt = draw(st.sampled_from(DTYPES))
    rt = world.rt
    lhs = rt.empty(dt, shape)
    kind = draw(st.sampled_from(["same", "alias", "other dtype", "other shape", "view"]))
    if kind == "alias":
        return lhs, lhs
    if kind == "other dtype":
        return lhs, rt.empty(draw(st.sampled_from(DTYPES)), shape)
    if kind == "other shape":
        return lhs, rt.empty(dt, (*shape, 2))
    rhs = rt.empty(dt, shape)
    if kind == "view":
        big = rt.empty(dt, (shape[0] + 1, *shape[1:]))
        view = draw(st.sampled_from(["offset", "transpose"]))
        if view == "offset":  # a compact view at an offset: the last axis sliced
            big = rt.empty(dt, (*shape[:-1], shape[-1] + 1))
            rhs = big[(slice(None),) * (len(shape) - 1) + (slice(1, None),)]
        elif len(shape) >= 2:
            rhs = rt.empty(dt, shape[::-1]).transpose() if len(shape) == 2 else rhs
        if draw(st.booleans()):
            lhs, rhs = rhs, lhs
    return lhs, rhs


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_plan_and_full_path_launch_and_raise_the_same(world, data):
    """For random shapes, dtypes, views and aliasing, of the add (which canonicalizes views)
    and of accumulate (an exclusive input): the replayed call equals the full path's."""
    name = data.draw(st.sampled_from([ADD, ACC]))
    lhs, rhs = data.draw(operands(world))
    full = world.observe(False, name, lhs, rhs, calls=1)
    planned = world.observe(True, name, lhs, rhs)
    assert planned == full


def test_a_replay_makes_one_context_check_and_its_launch(world):
    """The full path launches through cuda.core after its context check; a replay calls the
    driver's ``cuLaunchKernel`` itself (both paths' outcomes on every backend:
    tests/provider/test_plan_states.py)."""
    rt = world.rt
    a, b = rt.empty("float32", (64,)), rt.empty("float32", (64,))
    world.observe(False, ADD, a, b, calls=1)
    assert [n for n, _ in world.fake.calls] == ["cuCtxGetCurrent"] and len(world.launches) == 1
    world.observe(True, ADD, a, b)
    assert [n for n, _ in world.fake.calls] == ["cuCtxGetCurrent", "cuLaunchKernel"]
    assert "replay" in world.host.op(ADD).plans().values()


def test_an_aliased_exclusive_input_takes_the_full_path_and_its_error(world):
    rt = world.rt
    acc, x = rt.empty("float32", (32,)), rt.empty("float32", (32,))
    world.observe(True, ACC, acc, x)  # planned
    world.fake.calls.clear()
    with pytest.raises(tf.AliasingError):
        world.host.run(ACC, acc, acc)
    assert "cuLaunchKernel" not in [n for n, _ in world.fake.calls]


def test_a_variant_that_is_not_replayable_stays_on_the_full_path(world):
    """A workspace, and a decision outside the key (a scalar that changes every call)."""
    rt = world.rt
    counter = iter(range(1, 10**6))

    def with_workspace(ex: Any, x: tf.Tensor) -> tf.Tensor:
        with ex.raw("tests_plan.ws") as rs:
            out = rs.alloc_output(x.dtype, x.shape)
            rs.workspace(64)
            fn = world.module.function("add_kernel")
            rs.launch(
                fn,
                raw.LaunchConfig.flat(x.numel, 256),
                [rs.tensor_mut(out), rs.tensor(x), rs.tensor(x), raw.i32(1)],
            )
            return out

    def drifting(ex: Any, x: tf.Tensor) -> tf.Tensor:
        with ex.raw("tests_plan.drift") as rs:
            out = rs.alloc_output(x.dtype, x.shape)
            fn = world.module.function("add_kernel")
            rs.launch(
                fn,
                raw.LaunchConfig.flat(x.numel, 256),
                [rs.tensor_mut(out), rs.tensor(x), rs.tensor(x), raw.i32(next(counter))],
            )
            return out

    register_ops(
        world.host,
        "tests_plan2",
        "cuda-raw",
        {"tests_plan2.ws": with_workspace, "tests_plan2.drift": drifting},
    )
    x = rt.empty("float32", (16,))
    for op, why in (("tests_plan2.ws", "workspace"), ("tests_plan2.drift", "first recording")):
        for _ in range(6):
            world.fake.calls.clear()
            world.host.run(op, x)
            assert "cuLaunchKernel" not in [n for n, _ in world.fake.calls]
        (state,) = world.host.op(op).plans().values()
        assert state.startswith("full path") and why in state


def test_guards_send_the_call_to_the_full_path(world):
    """Another thread, debug waits, a capture (a session open on this thread, on every backend:
    tests/provider/test_plan_guards.py)."""
    rt = world.rt
    a, b = rt.empty("float32", (48,)), rt.empty("float32", (48,))
    world.observe(True, ADD, a, b)
    world.fake.calls.clear()
    thread = threading.Thread(target=lambda: world.host.run(ADD, a, b))
    thread.start()
    thread.join()
    assert "cuLaunchKernel" not in [n for n, _ in world.fake.calls]
    rt.debug_sync = True
    world.fake.cuStreamSynchronize = lambda stream: (0,)
    try:
        world.fake.calls.clear()
        world.launches.clear()
        world.host.run(ADD, a, b)
        assert len(world.launches) == 1  # cuda.core's launch, then the debug wait
    finally:
        rt.debug_sync = False
        del world.fake.cuStreamSynchronize
    # A capture holding the retirement queue (ex.capture() or a framework's graph): the full
    # path allocates (a framework's capture replaces the runtime's allocation): no replay, which
    # would reuse a block of the runtime's own.
    rt.retirement.refuse_wait = lambda what: None
    try:
        world.launches.clear()
        world.host.run(ADD, a, b)
        assert len(world.launches) == 1
    finally:
        rt.retirement.refuse_wait = None


def test_a_replayed_launch_fault_poisons_and_is_typed(world):
    rt = world.rt
    a, b = rt.empty("float32", (80,)), rt.empty("float32", (80,))
    world.observe(True, ADD, a, b)
    world.fake.launch_result = 1  # CUDA_ERROR_INVALID_VALUE
    try:
        with pytest.raises(tf.LaunchError, match="add_kernel"):
            world.host.run(ADD, a, b)
        assert rt.uuid_bytes not in driver.poisoned_devices()
        world.fake.launch_result = 700  # CUDA_ERROR_ILLEGAL_ADDRESS: sticky
        with pytest.raises(tf.ContextPoisonedError):
            world.host.run(ADD, a, b)
        assert rt.uuid_bytes in driver.poisoned_devices()
        with pytest.raises(tf.ContextPoisonedError):
            world.host.run(ADD, a, b)  # the full path refuses the poisoned runtime
    finally:
        world.fake.launch_result = 0
        driver.POISONED.pop(rt.uuid_bytes, None)


def test_a_plan_keeps_its_module_after_the_cache_dropped_it(world, monkeypatch):
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    rt = world.rt
    modules = [stand_in_module(rt, ADD_PARAMS)]
    owner = weakref.ref(modules[0].function("add_kernel").owner)
    rt.resources.clear()
    rt.resources.get((ADD, "module"), lambda: modules[0])
    a = rt.empty("float32", (96,))
    world.host.op(ADD).forget_plans()
    for _ in range(3):
        world.host.run(ADD, a, a)
    assert "replay" in world.host.op(ADD).plans().values()
    rt.resources.clear()
    modules.clear()
    assert owner() is not None  # the plan's function holds its module's library
    world.host.op(ADD).forget_plans()
    assert owner() is None
    rt.resources.get((ADD, "module"), lambda: world.module)
    rt.resources.get((ACC, "module"), lambda: world.module)


def test_the_steps_of_a_replay_run_alone_for_the_bench(world):
    rt = world.rt
    a, b = rt.empty("float32", (72,)), rt.empty("float32", (72,))
    world.observe(True, ADD, a, b)
    cases, state = _plan_steps(world.host, a, b)  # the bench's rows: the replay's steps()
    assert "replay" in state
    steps = {name: case.fn for name, case in zip(PLAN_STEPS, cases, strict=True)}
    assert set(steps) == {"replay", "enter/exit", "allocation", "slot writes", "launch"}
    world.fake.calls.clear()
    steps["enter/exit"]()
    assert steps["allocation"]().shape == (72,)
    steps["slot writes"]()
    steps["launch"]()
    assert steps["replay"]().shape == (72,)
    launched = [arg for name, arg in world.fake.calls if name == "cuLaunchKernel"]
    assert len(launched) == 2
    words = launch_words(launched[0][4])
    assert words[1:3] == [a.storage.ptr, b.storage.ptr] and words[3] == 72


def test_a_replay_reuses_the_block_its_previous_output_released(world):
    """A replayed call takes the block the previous output queued straight from the deferred
    queue (the free list not passed through), while every other queued release is still
    carried out at that allocation, a block of another class goes to the free list, and an
    output still alive is never handed out again."""
    rt = world.rt
    a, b = rt.empty("float32", (200,)), rt.empty("float32", (200,))
    world.observe(True, ADD, a, b)
    out = world.host.run(ADD, a, b)
    ptr, hits = out.storage.ptr, rt.blocks.hits
    kept = world.host.run(ADD, a, b)  # ``out`` is alive: another block
    assert kept.storage.ptr != ptr
    del out
    assert list(rt.deferred) == [("block", (ptr, 1024))]
    again = world.host.run(ADD, a, b)
    # ``kept`` took one from the free list, ``again`` reused the queued one: both are hits
    assert again.storage.ptr == ptr and rt.blocks.hits == hits + 2
    assert not rt.deferred and again.storage.release == ("block", (ptr, 1024))
    other = rt.empty("float32", (2000,))  # another size class
    other_ptr, freed = other.storage.ptr, rt.empty("float32", (300,))
    freed_ptr = freed.storage.ptr
    rt.deferred.append(("memory", 0xDEAD0))  # e.g. a block the free list refused, queued first
    fake_live = world.fake.live
    fake_live[0xDEAD0] = 1
    del again, freed  # now two blocks of the add's class queued behind the memory
    del other  # the newest queued release is of another class
    world.fake.calls.clear()
    out = world.host.run(ADD, a, b)
    assert not rt.deferred and ("free", (0xDEAD0, rt._stream)) in world.fake.calls  # all done
    assert out.storage.ptr in (ptr, freed_ptr)
    assert rt.blocks.take(rt.blocks.size_class(8000)) == other_ptr  # the other class: kept
    assert not isinstance(out, tuple) and out.shape == (200,)


def test_a_driver_entry_point_is_resolved_once_per_driver_and_a_missing_one_is_typed():
    """A replay launches through the driver's C entry point (``cuGetProcAddress``), resolved
    once per driver object; a symbol the driver lacks is a typed error naming it."""
    with recording_driver():
        first = driver.entry("cuLaunchKernel")
        assert driver.entry("cuLaunchKernel") is first
        with pytest.raises(tf.BackendError, match="has no cuNoSuchCall"):
            driver.entry("cuNoSuchCall")
    with recording_driver():
        assert driver.entry("cuLaunchKernel") is not first

"""A bridge call inside a framework's CUDA graph capture (torch's ``reduce-overhead``), without a
GPU: the recording driver stand-in captures as the driver does in global mode — ``cuEventQuery``
is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while a stream captures, and a wait on an event of the
captured stream joins the host's stream to the capture. The framework side is a buffer at an
address, borrowed by the bridge as torch's tensors are (``runtime.borrow``), and its stream."""

from __future__ import annotations

import itertools
import types
import weakref
from typing import Any

import pytest
from support.call_budget import calls_per_op
from support.driver_stand_in import ADD, STREAM_CAPTURE_UNSUPPORTED, launch_words, stand_in

import tenferro_host as tf
from tenferro_host.interop._bridge import ExportedOp, OutputAllocator, run_on_stream
from tenferro_host.provider import Lease, _op_plan

SCRATCH = "graph_stand_in.scratch"
AXES = "graph_stand_in.axes"
FRAMEWORK_STREAM = 0x7100
_addresses = itertools.count(0x7000_0000, 0x1_0000)


class FrameworkBuffer:
    """A framework tensor: ``n`` elements of ``dt`` at an address of its own."""

    __slots__ = ("__weakref__", "address", "dtype", "n")

    def __init__(self, dt: Any, n: int) -> None:
        self.address = next(_addresses)
        self.dtype = tf.dtype(dt)
        self.n = n

    def borrowed(self, rt: Any, read_only: bool) -> tf.Tensor:
        return rt.borrow(self.address, self.dtype, (self.n,), (1,), self, read_only)


def _scratch(ex: Any, x: tf.Tensor) -> tf.Tensor:
    """A raw variant with a workspace: memory the host allocates and frees inside the call."""
    with ex.raw(SCRATCH) as rs:
        rs.workspace(100)
    return ex.run(ADD, x, x)


def _axes(ex: Any, x: tf.Tensor, axes: Any = None) -> tf.Tensor:
    if axes != (0,):
        raise AssertionError(f"the variant got axes={axes!r}, not (0,)")
    return ex.run(ADD, x, x)


@pytest.fixture(scope="module")
def world() -> Any:
    with stand_in() as world:
        view = world.host.registry.staging("graph-stand-in-tests")
        view.add_op(
            tf.OpSpec(
                name=AXES,  # an object attribute: JAX hands it decoded, torch as a literal
                signature=tf.Signature(inputs=("x",), attributes={"axes": object}),
                reference=lambda x, axes=None: x + x,
                variants={"cuda-raw": _axes},
            )
        )
        view.add_op(
            tf.OpSpec(
                name=SCRATCH,
                signature=tf.Signature(inputs=("x",)),
                reference=lambda x: x + x,
                variants={"cuda-raw": _scratch},
            )
        )
        view.commit()
        yield world


def _call(world: Any, op: str, *, capturing: bool) -> tuple[Any, Any, list[FrameworkBuffer]]:
    """The bridge's call of ``op`` on two framework tensors, on the framework's stream."""
    rt = world.rt
    made: list[FrameworkBuffer] = []

    def make_buffer(nbytes: int, dt: Any) -> FrameworkBuffer:
        made.append(FrameworkBuffer(dt, nbytes // dt.itemsize))
        return made[-1]

    exported = ExportedOp(world.host, op)
    inputs = [FrameworkBuffer("float32", 256).borrowed(rt, True) for _ in exported.inputs]
    allocator = OutputAllocator(rt, make_buffer, lambda b: b.borrowed(rt, False).storage)
    results = run_on_stream(
        exported, rt, FRAMEWORK_STREAM, inputs, {}, allocator, capturing=capturing
    )
    return results, allocator, made


class _Held:
    """Something a lease keeps alive (weakly referenced by the test)."""


def _pending_work(world: Any) -> tuple[int, Any]:
    """A release queued before the capture (freed memory) and a lease behind an event."""
    rt, fake = world.rt, world.fake
    _, ptr = fake.cuMemAllocFromPoolAsync(64, rt.memory.handle, rt.stream_handle)
    rt.deferred.append(("memory", ptr))
    held = _Held()
    rt.retirement.retire(rt.record_event(), [Lease(held)])
    return ptr, weakref.ref(held)


@pytest.mark.parametrize("op", [ADD, SCRATCH])
def test_a_call_inside_a_framework_capture_neither_polls_frees_nor_uses_the_pool(world, op):
    rt, fake = world.rt, world.fake
    freed, lease = _pending_work(world)
    graph = fake.begin_capture(FRAMEWORK_STREAM)
    fake.calls.clear()
    try:
        results, allocator, made = _call(world, op, capturing=True)
        inside = fake.names()
        assert fake.capturing.get(rt._stream) == graph, "the host's stream joined the capture"
    finally:
        fake.end_capture(graph)
    # No event polled, nothing freed or taken from the runtime's pool inside the capture: the
    # graph's memory is the framework's (the output and the workspace).
    assert "cuEventQuery" not in inside and "free" not in inside and "alloc" not in inside
    assert allocator.buffer_of(results[0].storage) is not None
    assert (op == SCRATCH) == any(b.n == 25 for b in made)  # the 100-byte workspace
    assert freed in fake.live and lease() is not None
    # Retirement resumes after the capture, at the next drain point.
    with rt.session():
        pass
    assert freed not in fake.live and lease() is None
    fake.destroy_graph(graph)
    with rt.session():
        pass


@pytest.mark.parametrize("op", [ADD, SCRATCH])
def test_the_runtime_keeps_no_framework_buffer_alive_after_a_captured_call(world, op):
    """torch's CUDA graphs (``reduce-overhead``) require every live allocation of the graph's
    pool to be an output the graph tracks: an intermediate, a workspace or an input the host
    held until a later drain point would be one it cannot account for."""
    fake = world.fake
    graph = fake.begin_capture(FRAMEWORK_STREAM)
    try:
        results, allocator, made = _call(world, op, capturing=True)
        buffers = [weakref.ref(b) for b in made]
        del results, allocator, made
        assert [b() for b in buffers] == [None] * len(buffers)  # inside the capture, no drain
    finally:
        fake.end_capture(graph)
        fake.destroy_graph(graph)
    with world.rt.session():
        pass


def test_a_stream_ordering_the_driver_refuses_is_a_typed_error_and_the_call_still_signals(
    world, monkeypatch
):
    """The wait before the call fails: nothing runs, and the error names the ordering."""
    monkeypatch.setattr(world.fake, "cuStreamWaitEvent", lambda *a: (STREAM_CAPTURE_UNSUPPORTED,))
    with pytest.raises(tf.BackendError, match=r"ordering 'cuda:0'.s stream after stream 0x7100"):
        _call(world, ADD, capturing=False)
    monkeypatch.undo()
    # The signal after the call runs even when the op raises (a bad attribute here).
    world.fake.calls.clear()
    rt = world.rt
    inputs = [FrameworkBuffer("float32", 8).borrowed(rt, True) for _ in range(2)]
    allocator = OutputAllocator(rt, lambda n, dt: None)
    with pytest.raises(tf.ValidationError, match="factor"):
        run_on_stream(
            ExportedOp(world.host, ADD),
            rt,
            FRAMEWORK_STREAM,
            inputs,
            {"factor": 2.0},
            allocator,
            capturing=False,
        )
    waits = [a for n, a in world.fake.calls if n == "cuStreamWaitEvent"]
    assert [stream for stream, _ in waits] == [rt._stream, FRAMEWORK_STREAM]


@pytest.mark.skipif(
    not _op_plan.ENABLED, reason="TENFERRO_OP_PLAN=0: every call takes the full path"
)
def test_a_planned_bridge_call_stays_within_its_call_budget(world):
    """A bridge's CUDA call once planned (torch's and XLA's ``run_on_stream``, the framework
    side stood in): Python-level calls counted, never timed (docs/frameworks.md, Costs)."""
    rt = world.rt
    exported = ExportedOp(world.host, ADD)
    inputs = [FrameworkBuffer("float32", 512).borrowed(rt, True) for _ in range(2)]

    def call() -> Any:
        allocator = OutputAllocator(rt, make, imp)
        return run_on_stream(exported, rt, FRAMEWORK_STREAM, inputs, {}, allocator, capturing=False)

    def make(nbytes: int, dt: Any) -> FrameworkBuffer:
        return FrameworkBuffer(dt, nbytes // dt.itemsize)

    def imp(b: FrameworkBuffer) -> Any:
        return b.borrowed(rt, False).storage

    for _ in range(3):
        call()
    assert "replay" in ExportedOp(world.host, ADD).host.op(ADD).plans().values()
    assert calls_per_op(call) <= BRIDGE_CALL_BUDGET


#: Calls of a planned CUDA bridge call (run_on_stream) on the stand-in: 79.01, of which the
#: test's make/import and the stand-in driver's C entry points calling back into Python (two
#: event records, two waits, the launch) are about 25; 80.01 on the pure-Python call since its
#: plan table's ``find`` hands the key to ``lookup`` (the prepared call's lookup). A bridge's
#: call on a planned key takes the prepared call (test_prepared_bridge_call.py), not this path.
BRIDGE_CALL_BUDGET = 81


def test_a_runtime_that_cannot_borrow_says_so(world):
    with pytest.raises(tf.UnsupportedError, match="cannot borrow"):
        world.host.backend("cpu").borrow(0, tf.float32, (1,), (1,))


def test_the_modules_stay_pinned_until_the_framework_graph_dies(world):
    rt, fake = world.rt, world.fake
    graph = fake.begin_capture(FRAMEWORK_STREAM)
    try:
        _call(world, ADD, capturing=True)
    finally:
        fake.end_capture(graph)
    (pins,) = [p for p in rt.graph_pins() if p.op == ADD]
    module = rt.resources.get((ADD, "module"), lambda: None)
    assert module in pins.modules and fake.graph_objects[graph]
    gone = weakref.ref(pins)
    del pins
    rt.resources.clear()  # evicted from the cache: the graph still holds the module
    with rt.session():
        pass
    assert gone() is not None and module in gone().modules  # type: ignore[union-attr]
    fake.destroy_graph(graph)  # the driver runs the user object's destructor
    assert not [p for p in rt.graph_pins() if p.op == ADD]
    with rt.session():  # the drain point that lets the pins go
        pass
    assert gone() is None and not rt.deferred
    rt.resources.get((ADD, "module"), lambda: module)  # cached again for the next tests


def test_outside_a_capture_the_call_pins_nothing(world):
    fake = world.fake
    fake.calls.clear()
    results, allocator, _ = _call(world, ADD, capturing=False)
    assert allocator.buffer_of(results[0].storage) is not None
    assert "cuUserObjectCreate" not in fake.names()
    assert world.rt.retirement.refuse_wait is None and "allocate_bytes" not in vars(world.rt)


def test_a_framework_capture_of_a_runtime_inside_ex_capture_is_refused(world):
    rt = world.rt
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture():
            with pytest.raises(tf.CaptureError, match="already being captured"):
                rt.foreign_capture(lambda n: None).__enter__()
    assert rt.retirement.refuse_wait is None


def test_a_host_wait_inside_a_framework_capture_is_a_capture_error(world):
    rt = world.rt
    retirement = rt.retirement
    saved = retirement.capacity
    retirement.retire(rt.record_event(), [Lease(_Held())])
    retirement.capacity = len(retirement)  # full: the next retire would wait on the host
    try:
        with rt.foreign_capture(lambda n: None), pytest.raises(tf.CaptureError, match="block"):
            retirement.retire(rt.record_event(), [Lease(_Held())])
    finally:
        retirement.capacity = saved
    with rt.session():  # polled again after the capture
        pass
    assert not len(retirement)


def test_the_jax_gpu_handler_writes_xlas_result_buffer_on_xlas_stream(world):
    """The JAX handler's CUDA branch on the stand-in driver: it orders the host's stream after
    XLA's, the add's launch writes XLA's result buffer itself (no copy), and XLA's stream waits
    for the launch."""
    pytest.importorskip("jax", reason="JAX is not installed (scripts/setup installs it)")
    from tenferro_host.interop import jax as tf_jax
    from tenferro_host.interop._xla_ffi import BufferView, Call

    op = ExportedOp(world.host, ADD)
    op._runtimes["cuda:0"] = world.rt  # the handler's runtime: the stand-in
    for _ in range(3):  # learned, then planned: each call writes that call's buffers
        args = [BufferView("float32", (256,), next(_addresses)) for _ in range(2)]
        ret = BufferView("float32", (256,), next(_addresses))
        call = Call(tuple(args), (ret,), {"attrs": "{}"}, FRAMEWORK_STREAM, 0)
        world.fake.calls.clear()
        world.launches.clear()
        tf_jax.JaxOp._execute(types.SimpleNamespace(op=op), call)
        names = world.fake.names()
        assert (ret.address, args[0].address, args[1].address) == _add_pointers(world)
        assert not any("Memcpy" in n for n in names)  # the result written in place: no copy
        # XLA's stream before the launch, the launch before XLA's stream: an event and a wait
        # each, in that order
        order = [n for n in names if n in ("cuEventRecord", "cuStreamWaitEvent", "cuLaunchKernel")]
        launch = ["cuLaunchKernel"] if "cuLaunchKernel" in names else []
        pair = ["cuEventRecord", "cuStreamWaitEvent"]  # XLA's stream, then the host's
        assert order == [*pair, *launch, *pair]
    assert launch or not _op_plan.ENABLED, "the third call replays its plan"


def test_the_jax_gpu_handler_hands_the_op_its_attributes_decoded(world):
    pytest.importorskip("jax", reason="JAX is not installed (scripts/setup installs it)")
    from tenferro_host.interop import jax as tf_jax
    from tenferro_host.interop._xla_ffi import BufferView, Call

    op = ExportedOp(world.host, AXES)
    op._runtimes["cuda:0"] = world.rt
    call = Call(
        (BufferView("float32", (64,), next(_addresses)),),
        (BufferView("float32", (64,), next(_addresses)),),
        {"attrs": repr({"axes": (0,)})},  # what JaxOp.__call__ passes
        FRAMEWORK_STREAM,
        0,
    )
    tf_jax.JaxOp._execute(types.SimpleNamespace(op=op), call)


def _add_pointers(world: Any) -> tuple[int, int, int]:
    """(out, lhs, rhs) of the add launched by the call: through cuda.core (the full path) or
    the driver's entry point (a planned call)."""
    replayed = [a for n, a in world.fake.calls if n == "cuLaunchKernel"]
    if replayed:
        words = launch_words(replayed[-1][4])
        return words[0], words[1], words[2]
    out, lhs, rhs = (int(a) for a in world.launches[-1][3:6])
    return out, lhs, rhs

"""The bridges' prepared call on the stand-in CUDA driver, without a GPU: once the op handle has
planned the key a framework's buffers give as borrowed inputs, the bridge launches the replay on
the buffers' addresses (``launch_on_stream``) — no host tensor, no session, no allocation of the
host — between the framework's stream and the runtime's, and falls back to the call's own path
wherever the replay does not apply (not planned, other attributes, an input written, the guard).
Both the compiled replay and the pure-Python one (``TENFERRO_COMPILED_CALL=0``, scripts/test's
third pass) are held to the same results."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from support.call_budget import calls_per_op
from support.driver_stand_in import ADD, launch_words, stand_in

import tenferro_host as tf
from tenferro_host.interop._bridge import (
    ExportedOp,
    OutputAllocator,
    launch_on_stream,
    run_on_stream,
)
from tenferro_host.provider import _op_plan

pytestmark = pytest.mark.skipif(
    not _op_plan.ENABLED, reason="TENFERRO_OP_PLAN=0: no call is planned, nothing is prepared"
)

AXES = "prepared_stand_in.axes"
FRAMEWORK_STREAM = 0x7200
N = 256
_addresses = itertools.count(0x9000_0000, 0x1_0000)


def _axes(ex: Any, x: tf.Tensor, axes: Any = None) -> tf.Tensor:
    return ex.run(ADD, x, x)


def _register(world: Any, dist: str, name: str) -> None:
    """Op ``name`` (one input, an ``object`` attribute ``axes``: the add of it with itself),
    registered by distribution ``dist``."""
    view = world.host.registry.staging(dist)
    view.add_op(
        tf.OpSpec(
            name=name,
            signature=tf.Signature(inputs=("x",), attributes={"axes": object}),
            reference=lambda x, axes=None: x + x,
            variants={"cuda-raw": _axes},
        )
    )
    view.commit()


@pytest.fixture
def world() -> Any:
    with stand_in() as world:
        _register(world, "prepared-stand-in-tests", AXES)
        yield world


def _key(rt: Any, n_inputs: int, n: int = N, dt: str = "float32") -> tuple[Any, ...]:
    """The key the bridges build for ``n_inputs`` 1-D buffers of ``n`` elements."""
    return (tf.dtype(dt), (n,), (1,), 0, rt) * n_inputs


def _learn(world: Any, op: ExportedOp, attrs: dict[str, Any], n: int = N) -> None:
    """Three bridge calls through the op handle's path (run_on_stream): the key is planned."""
    rt = world.rt
    dt = tf.dtype("float32")

    def make(nbytes: int, dt: Any) -> int:
        return next(_addresses)

    def imp(address: int) -> Any:
        return rt.borrow(address, dt, (nbytes_n(),), (1,)).storage

    def nbytes_n() -> int:
        return n

    for _ in range(3):
        inputs = [rt.borrow(next(_addresses), dt, (n,), (1,), None, True) for _ in op.inputs]
        allocator = OutputAllocator(rt, make, imp)
        run_on_stream(op, rt, FRAMEWORK_STREAM, inputs, attrs, allocator, capturing=False)


def _launched(world: Any) -> list[list[int]]:
    return [launch_words(a[4]) for n, a in world.fake.calls if n == "cuLaunchKernel"]


def test_a_planned_key_launches_on_the_frameworks_addresses_between_the_streams(world):
    rt, fake = world.rt, world.fake
    op = ExportedOp(world.host, ADD)
    assert op.prepared(_key(rt, 2), {}) is None  # not planned yet: the call's own path
    _learn(world, op, {})
    plan = op.prepared(_key(rt, 2), {})
    assert plan is not None
    (_, (dt, shape, strides, offset, _)), *more = plan.outputs
    assert (dt.name, shape, strides, offset, more) == ("float32", (N,), (1,), 0, [])
    fake.calls.clear()
    lhs, rhs, out = 0xA000_0000, 0xA010_0000, 0xA020_0000
    assert launch_on_stream(rt, FRAMEWORK_STREAM, plan, (lhs, rhs), (out,))
    assert [w[:3] for w in _launched(world)] == [[out, lhs, rhs]]
    order = [
        (n, a[0] if n == "cuStreamWaitEvent" else None)
        for n, a in fake.calls
        if n in ("cuEventRecord", "cuStreamWaitEvent", "cuLaunchKernel")
    ]
    assert order == [  # the runtime's stream after the framework's, the framework's after it
        ("cuEventRecord", None),
        ("cuStreamWaitEvent", rt._stream),
        ("cuLaunchKernel", None),
        ("cuEventRecord", None),
        ("cuStreamWaitEvent", FRAMEWORK_STREAM),
    ]
    assert not any("Alloc" in n or "Memcpy" in n for n in fake.names())  # nothing of the host
    assert not fake.c_errors


def test_a_key_the_handle_did_not_plan_is_not_prepared(world):
    rt = world.rt
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    assert op.prepared(_key(rt, 2, n=N + 1), {}) is None  # another shape
    assert op.prepared(_key(rt, 2, dt="float64"), {}) is None  # another dtype
    assert op.prepared(_key(rt, 2), {"factor": 2.0}) is None  # attributes it was not called with
    strided = (tf.dtype("float32"), (N,), (2,), 0, rt) * 2
    assert op.prepared(strided, {}) is None  # another layout


def test_attributes_are_keyed_by_their_exact_values(world):
    """The key of the attributes is the op handle's: (0,) is not (False,), nor (0.0,)."""
    rt = world.rt
    op = ExportedOp(world.host, AXES)
    _learn(world, op, {"axes": (0,)})
    assert op.prepared(_key(rt, 1), {"axes": (0,)}) is not None
    assert op.prepared(_key(rt, 1), {"axes": (False,)}) is None
    assert op.prepared(_key(rt, 1), {"axes": (0.0,)}) is None


def test_a_replay_that_writes_an_input_is_not_prepared(world, monkeypatch):
    """The bridges lend their inputs read-only: a replay that writes one takes the call's path,
    which raises the typed error."""
    rt = world.rt
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    plan = op.prepared(_key(rt, 2), {})
    monkeypatch.setattr(plan, "exclusive", (0,))
    assert op.prepared(_key(rt, 2), {}) is None


def test_an_op_registered_again_is_refused_not_replayed_from_its_old_plans(world):
    """A second distribution registering the op puts it in conflict: the bridge's prepared call
    (and a call through a handle made before) raises the conflict's PluginError."""
    rt = world.rt
    op = ExportedOp(world.host, AXES)
    _learn(world, op, {"axes": (0,)})
    x = rt.borrow(next(_addresses), tf.dtype("float32"), (N,), (1,), None, True)
    _register(world, "prepared-stand-in-tests-again", AXES)
    with pytest.raises(tf.PluginError, match="several distributions"):
        op.prepared(_key(rt, 1), {"axes": (0,)})
    with pytest.raises(tf.PluginError, match="several distributions"):
        world.host.run(AXES, x, axes=(0,))


def test_the_replays_guard_refuses_and_the_streams_stay_ordered(world, monkeypatch):
    """A guard that refuses (debug_sync, another thread) launches nothing and answers False: the
    bridge takes the call's own path."""
    rt, fake = world.rt, world.fake
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    plan = op.prepared(_key(rt, 2), {})
    monkeypatch.setattr(rt, "debug_sync", True)
    fake.calls.clear()
    assert launch_on_stream(rt, FRAMEWORK_STREAM, plan, (1 << 32, 2 << 32), (3 << 32,)) is False
    assert not _launched(world)
    monkeypatch.undo()
    got: list[bool] = []
    thread = threading.Thread(
        target=lambda: got.append(plan.launch_buffers((1 << 32, 2 << 32), (3 << 32,)))
    )
    thread.start()
    thread.join()
    assert got == [False] and not _launched(world)
    assert plan.launch_buffers((1 << 32, 2 << 32), (3 << 32,)) is True


def test_a_thread_without_a_context_launches_under_the_runtimes_and_is_left_without(world):
    rt, fake = world.rt, world.fake
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    plan = op.prepared(_key(rt, 2), {})
    fake.thread_context = 0
    fake.calls.clear()
    assert plan.launch_buffers((1 << 32, 2 << 32), (3 << 32,)) is True
    assert [w[:3] for w in _launched(world)] == [[3 << 32, 1 << 32, 2 << 32]]
    switches = [a for n, a in fake.calls if n == "cuCtxSetCurrent"]
    assert switches == [rt.primary._handle, 0] and fake.cuCtxGetCurrent()[1] == 0


def test_a_launch_the_driver_refuses_is_its_typed_error_and_the_framework_still_waits(world):
    rt, fake = world.rt, world.fake
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    plan = op.prepared(_key(rt, 2), {})
    fake.calls.clear()
    fake.launch_result = 1  # CUDA_ERROR_INVALID_VALUE
    try:
        with pytest.raises(tf.LaunchError, match="launching"):
            launch_on_stream(rt, FRAMEWORK_STREAM, plan, (1 << 32, 2 << 32), (3 << 32,))
    finally:
        fake.launch_result = 0
    waits = [a[0] for n, a in fake.calls if n == "cuStreamWaitEvent"]
    assert waits == [rt._stream, FRAMEWORK_STREAM]


def test_too_few_addresses_are_a_value_error_not_a_read_past_the_tuple(world):
    rt = world.rt
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    plan = op.prepared(_key(rt, 2), {})
    with pytest.raises((ValueError, IndexError)):
        plan.launch_buffers((1 << 32,), (3 << 32,))
    with pytest.raises((ValueError, IndexError)):
        plan.launch_buffers((1 << 32, 2 << 32), ())


def test_the_prepared_call_stays_within_its_call_budget(world):
    """The bridges' prepared call (the key's lookup and the launch between the streams), counted
    in Python-level calls, never timed: against 79 for the op handle's path on borrowed tensors
    (test_framework_graph_stand_in.py)."""
    rt = world.rt
    op = ExportedOp(world.host, ADD)
    _learn(world, op, {})
    key = _key(rt, 2)

    def call() -> Any:
        plan = op.prepared(key, {})
        return launch_on_stream(rt, FRAMEWORK_STREAM, plan, (1 << 32, 2 << 32), (3 << 32,))

    assert call()
    assert calls_per_op(call) <= PREPARED_CALL_BUDGET


#: Calls of the prepared call on the stand-in: 57.01 (56.67 on the pure-Python call, whose four
#: ctypes calls of the stream ordering cProfile does not count: the compiled one's two
#: ``order_streams`` it does), of which the stand-in driver's C entry points calling back into
#: Python (two event records, two waits, the context check, the launch) are 43
PREPARED_CALL_BUDGET = 58


def test_the_torch_kernel_launches_the_prepared_call_on_torchs_tensors(world):
    """``TorchOp._prepared`` (the CUDA kernel's fast road) on the stand-in: the key of torch's
    tensors is the borrowed inputs' key, the output is ``torch.empty`` in the replay's layout and
    the launch writes its address beside the inputs'. CPU tensors stand in for CUDA ones here
    (their ``get_device()`` is -1, the index the call is given)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (scripts/setup does)")
    from tenferro_host.interop import torch as tf_torch

    rt, fake = world.rt, world.fake
    name = "prepared_stand_in.torch_axes"  # exported once per process, for this world's host
    _register(world, "prepared-stand-in-torch", name)
    op = tf_torch.export(name, host=world.host)
    x = torch.ones(N)
    cpu = torch.device("cpu")
    assert op._prepared(rt, -1, cpu, FRAMEWORK_STREAM, (x,), {"axes": (0,)}) is None
    _learn(world, op.op, {"axes": (0,)})
    fake.calls.clear()
    out = op._prepared(rt, -1, cpu, FRAMEWORK_STREAM, (x,), {"axes": (0,)})
    assert isinstance(out, torch.Tensor) and out.shape == (N,) and out.stride() == (1,)
    assert [w[:3] for w in _launched(world)] == [[out.data_ptr(), x.data_ptr(), x.data_ptr()]]
    waits = [a[0] for n, a in fake.calls if n == "cuStreamWaitEvent"]
    assert waits == [rt._stream, FRAMEWORK_STREAM]
    # what the key does not cover takes the kernel's own path: other attributes, a dtype,
    # another device, a lazily conjugated tensor
    assert op._prepared(rt, -1, cpu, FRAMEWORK_STREAM, (x,), {"axes": (1,)}) is None
    assert op._prepared(rt, -1, cpu, FRAMEWORK_STREAM, (x.double(),), {"axes": (0,)}) is None
    assert op._prepared(rt, 0, cpu, FRAMEWORK_STREAM, (x,), {"axes": (0,)}) is None
    z = torch.ones(N, dtype=torch.complex64).conj()
    assert op._prepared(rt, -1, cpu, FRAMEWORK_STREAM, (z,), {"axes": (0,)}) is None


def test_a_lazily_conjugated_input_is_borrowed_resolved(world):
    """torch's conjugate bit leaves the memory as it was: the CUDA kernel borrows the resolved
    values (a copy), never the memory under the bit (a silently wrong answer)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (scripts/setup does)")
    from tenferro_host.interop.torch import _cuda_input

    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    for lazy in (z.conj(), torch._neg_view(z)):
        borrowed = _cuda_input(world.rt, -1, lazy, "x")
        owner = borrowed.storage.owner
        assert borrowed.storage.ptr != z.data_ptr() and torch.equal(owner, lazy.resolve_conj())

"""The host actor's state without Ray: tensors kept per call key, handles, their owner, release,
the error rules, pickled errors."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
from support.fake_nccl import DriverNccl, FakeComm, FakeNccl, appears

import tenferro_host as tf
from tenferro_host import errors
from tenferro_host.distributed import HostWorker, TensorHandle
from tenferro_host.distributed.collectives import NcclBinding, NcclCommunicator, load_binding

STAND_IN = "support.fake_nccl:FakeNccl"
#: A bound that only says "no hang": every wait below is bounded by it.
NO_HANG_S = 30.0


@pytest.fixture(scope="module")
def worker():
    return HostWorker("cpu:0")


def test_an_op_runs_on_handles_and_its_result_stays_as_a_handle(worker):
    a, b = worker.upload(("a", "b"), np.ones(3, np.float32), np.arange(3, dtype=np.float32))
    out = worker.run("out ext_add_kernel.add", a, b)
    handle = TensorHandle.parse(out)  # a result is its tensor's address: a short string
    assert (handle.owner, handle.call, handle.output) == (worker.id, "out", 0)
    assert (handle.shape, handle.dtype, handle.backend) == ((3,), "float32", "cpu:0")
    assert handle.address == out and TensorHandle.parse(handle.address) == handle
    np.testing.assert_array_equal(worker.download(out), [1, 2, 3])
    held = worker.held()
    worker.free(a, b, out)
    assert worker.held() == held - 3
    with pytest.raises(tf.SessionClosedError, match="was freed"):
        worker.download(out)


def test_release_drops_every_tensor_of_a_call_and_skips_unknown_keys(worker):
    held = worker.held()
    a = worker.upload(("r1",), np.ones(2, np.float32))
    worker.run("r2 ext_add_kernel.add", a, a)
    assert worker.held() == held + 2
    worker.release(["r1", "r2", "never-made"])
    assert worker.held() == held
    with pytest.raises(tf.SessionClosedError, match="went out of scope"):
        worker.download(a)


def test_an_address_of_no_tensor_is_a_typed_error(worker):
    for wrong in ("not an address", "a|b|zero|float32|3", "a|b|0|float32|3x"):
        with pytest.raises(tf.ValidationError, match="is not a tensor's address"):
            worker.download(wrong)
    scalar = TensorHandle.parse(f"{worker.id}|k|0|float64|")
    assert scalar.shape == () and TensorHandle.parse(scalar.address) == scalar


def test_a_call_key_is_used_once(worker):
    worker.upload(("once",), np.ones(2, np.float32))
    with pytest.raises(tf.ValidationError, match="already used"):
        worker.upload(("once",), np.ones(2, np.float32))
    with pytest.raises(tf.ValidationError, match="one call key per array"):
        worker.upload(("k1",), np.ones(2, np.float32), np.ones(2, np.float32))


def test_an_attribute_the_caller_took_as_its_own_is_refused_if_the_op_declares_it(worker):
    a = worker.upload(("q",), np.arange(3, dtype=np.float32))
    out = worker.run("q2/timeout_s ext_add_kernel.add", a, a)  # not an attribute of it
    np.testing.assert_array_equal(worker.download(out), [0, 2, 4])
    with pytest.raises(tf.ValidationError, match="declares an attribute 'axis'") as info:
        worker.run("q3/axis linalg.sum", a)
    assert info.value.argument == "axis" and "RemoteHost.remote" in info.value.message
    with pytest.raises(tf.ValidationError, match="declares an attribute 'axis'"):
        worker.run(("q4", "linalg.sum", {"axis": 0}, ("axis",)), a)
    summed = worker.run(("q5", "linalg.sum", {"axis": 0}, ()), a)  # the header with attributes
    np.testing.assert_array_equal(worker.download(summed), 3.0)


def test_a_shard_is_uploaded_and_run_in_one_call(worker):
    out = worker.run_arrays("shard", "ext_add_kernel.add", {}, *(np.ones(2, np.int32),) * 2)
    np.testing.assert_array_equal(worker.download(out), [2, 2])


def test_a_handle_of_another_actor_is_a_foreign_runtime_error(worker):
    other = HostWorker("cpu:0")
    h = other.upload(("f",), np.ones(2, np.float32))
    with pytest.raises(tf.ForeignRuntimeError, match=f"lives in host actor {other.id}"):
        worker.run("f2 ext_add_kernel.add", h, h)


def test_caps_report_the_runtime_and_what_can_run_there(worker):
    caps = worker.caps()
    assert caps.backend == "cpu:0" and caps.kind == "cpu" and caps.arch is None
    assert "cpu" in caps.backends and caps.device["index"] == 0
    assert caps.can_run("ext_add_kernel.add") and not caps.can_run("ext_add_kernel.add", "rocm")
    assert not caps.can_run("no_such.op")
    assert caps.peer_pairs == ()


def test_collectives_need_a_communicator_and_a_known_name(worker):
    h = worker.upload(("c",), np.ones(2, np.float32))
    with pytest.raises(tf.ValidationError, match="not one of all_reduce"):
        worker.collective("c1", "reduce_scatter", {}, h)
    with pytest.raises(tf.RuntimeStateError, match="init_collectives"):
        worker.collective("c2", "all_reduce", {}, h)


def test_collectives_on_a_cpu_runtime_are_unsupported():
    rt = tf.Host().backend("cpu")
    comm = NcclCommunicator(rt, 1, 0, b"", binding=DriverNccl(None))
    with pytest.raises(tf.UnsupportedError, match="run on CUDA runtimes") as info:
        comm.all_reduce(rt.upload(np.ones(2, np.float32)))
    assert info.value.feature == "collectives"


@pytest.fixture
def fake_nccl_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCCL_DIR", str(tmp_path))
    return tmp_path


def test_a_join_no_other_rank_makes_times_out_and_aborts_its_communicator(fake_nccl_dir):
    rt = tf.Host().backend("cpu")
    binding = FakeNccl()
    uid = binding.unique_id()
    with pytest.raises(tf.CallTimeoutError, match="rank 0 of 2: NCCL join did not") as info:
        NcclCommunicator(rt, 2, 0, uid, binding=binding, timeout_s=0.2)
    assert isinstance(info.value, TimeoutError) and info.value.timeout_s == 0.2
    assert binding.calls == [("abort", FakeComm(0, 2, Path(uid.decode())))]
    assert (Path(uid.decode()) / "aborted-rank0").exists()


def test_a_join_cancelled_from_another_thread_aborts_at_once(fake_nccl_dir):
    rt = tf.Host().backend("cpu")
    binding = FakeNccl()
    uid = binding.unique_id()
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(tf.SessionClosedError, match="join was aborted"):
        NcclCommunicator(rt, 2, 0, uid, binding=binding, timeout_s=NO_HANG_S, cancel=cancel)
    assert [c[0] for c in binding.calls] == ["abort"]


def test_abort_and_close_end_a_communicator_once_and_later_calls_say_which(fake_nccl_dir):
    rt = tf.Host().backend("cpu")
    x = rt.upload(np.ones(2, np.float32))
    binding = FakeNccl()
    aborted = NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding)
    aborted.abort()
    aborted.abort()
    aborted.close()
    assert [c[0] for c in binding.calls] == ["abort"]
    with pytest.raises(tf.SessionClosedError, match="closed by an abort"):
        aborted.all_reduce(x)
    closed = NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding)
    closed.close()
    closed.abort()
    assert [c[0] for c in binding.calls] == ["abort", "close"]
    with pytest.raises(tf.SessionClosedError, match=r"closed by close\(\)"):
        closed.broadcast(x)


def test_nccls_own_failure_while_polling_aborts_the_communicator(fake_nccl_dir):
    class Failing(FakeNccl):
        def ready(self, comm):
            raise tf.BackendError("NCCL communicator failed: remote process exited")

    rt = tf.Host().backend("cpu")
    binding = Failing()
    with pytest.raises(tf.BackendError, match="remote process exited") as info:
        NcclCommunicator(rt, 1, 0, binding.unique_id(), binding=binding)
    assert [c[0] for c in binding.calls] == ["abort"]
    assert "communicator is aborted" in info.value.__notes__[0]


def test_collective_abort_frees_a_worker_blocked_in_a_join(fake_nccl_dir):
    worker = HostWorker("cpu:0")
    uid = worker.collective_unique_id(STAND_IN)
    failure: list[BaseException] = []

    def join() -> None:
        try:
            worker.collective_init(uid, 2, 0, STAND_IN, NO_HANG_S)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            failure.append(exc)

    blocked = threading.Thread(target=join, daemon=True)
    blocked.start()
    assert appears(Path(uid.decode()) / "rank0")
    assert worker.collective_abort(uid) == "in flight"  # as the actor's control thread would
    blocked.join(NO_HANG_S)
    assert not blocked.is_alive()
    assert isinstance(failure[0], tf.SessionClosedError)
    assert (Path(uid.decode()) / "aborted-rank0").exists()
    assert worker.collective_abort(uid) == "ended"  # that join began, and is over
    # A join of that id that was still queued refuses when it begins; so does one of an id
    # aborted before any join of it.
    with pytest.raises(tf.SessionClosedError, match="before its join began"):
        worker.collective_init(uid, 2, 0, STAND_IN, NO_HANG_S)
    later = worker.collective_unique_id(STAND_IN)
    assert worker.collective_abort(later) == "not begun"
    with pytest.raises(tf.SessionClosedError, match="before its join began"):
        worker.collective_init(later, 1, 0, STAND_IN, NO_HANG_S)
    assert not (Path(later.decode()) / "rank0").exists()


def test_collective_abort_aborts_an_idle_communicator_and_its_collectives_then_refuse(
    fake_nccl_dir,
):
    worker = HostWorker("cpu:0")
    assert worker.collective_abort() == "not begun"  # nothing joined: nothing to do
    uid = worker.collective_unique_id(STAND_IN)
    assert worker.collective_init(uid, 1, 0, STAND_IN, NO_HANG_S) == 0
    assert worker.collective_abort() == "idle"
    assert (Path(uid.decode()) / "aborted-rank0").exists()
    h = worker.upload(("ab",), np.ones(2, np.float32))
    with pytest.raises(tf.SessionClosedError, match="closed by an abort"):
        worker.collective("ab2", "all_reduce", {}, h)
    again = worker.collective_unique_id(STAND_IN)
    assert worker.collective_init(again, 1, 0, STAND_IN, NO_HANG_S) == 0  # a fresh one joins


def test_nccl_binding_without_nccl_says_what_to_install():
    try:
        binding = NcclBinding()
    except tf.UnsupportedError as exc:
        assert "nccl4py" in exc.message and exc.feature == "collectives"
    else:  # a machine with the NCCL library: a unique id is 128 bytes
        assert len(binding.unique_id()) == 128


def test_load_binding_names_module_and_class():
    assert isinstance(load_binding("support.fake_nccl:FakeNccl"), FakeNccl)
    with pytest.raises(tf.ValidationError, match="'module:Class'"):
        load_binding("support.fake_nccl")
    with pytest.raises(tf.ValidationError, match="cannot be loaded here"):
        load_binding("support.fake_nccl:NoSuchBinding")
    with pytest.raises(tf.ValidationError, match="cannot be loaded here"):
        load_binding("no_such_module:Binding")


class CodedError(errors.BackendError):
    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


@pytest.mark.parametrize("name", errors.__all__)
def test_every_typed_error_pickles_with_its_type_fields_and_message(name):
    cls = getattr(errors, name)
    error = cls("what was wrong; what to do", op="pkg.op")
    error.add_note("a note")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls
    assert back.__dict__ == error.__dict__ and str(back) == str(error) and back.args == error.args


def test_a_subclass_with_its_own_required_fields_pickles():
    back = pickle.loads(pickle.dumps(CodedError("bad", code=7)))
    assert type(back) is CodedError and back.code == 7 and str(back) == "bad"


def test_node_resources_are_empty_without_cuda():
    from tenferro_host.distributed import node_resources

    host = tf.Host(disabled=["cuda"])
    assert node_resources(host) == {}

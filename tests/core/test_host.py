"""Host: backend names and memoization, creation errors, op dispatch errors; the errors about a
runtime's tensors (foreign, not uploaded, wrong arity) on every backend (``each_rt``). A
runtime's stats: test_runtime_stats.py."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf

ADD = "ext_add_kernel.add"


@pytest.fixture
def cpu(host):
    return host.backend("cpu")


@pytest.mark.parametrize("name", ["", "CPU", "cpu:", "cpu:-1", "cpu:x", "cpu:0:1", " cpu", "1cpu"])
def test_malformed_backend_names(host, name):
    with pytest.raises(tf.ValidationError, match=r"kind\[:index\]") as info:
        host.backend(name)
    assert info.value.argument == "name"


@pytest.mark.parametrize("name", [None, 0, b"cpu"])
def test_backend_name_must_be_a_string(host, name):
    with pytest.raises(tf.ValidationError, match="does not match"):
        host.backend(name)


def test_unknown_kind_names_the_installed_ones(host):
    with pytest.raises(tf.UnsupportedError, match="no provider plugin for backend kind 'tpu'") as i:
        host.backend("tpu")
    assert "cpu" in str(i.value) and i.value.backend == "tpu"
    with pytest.raises(tf.UnsupportedError):
        host.new_backend("tpu:1")


def test_index_beyond_the_devices(host):
    with pytest.raises(tf.ValidationError, match="has 1 device"):
        host.backend("cpu:1")


def test_backend_is_memoized_and_new_backend_is_not(host, cpu):
    assert host.backend("cpu:0") is cpu
    assert (cpu.kind, cpu.name, cpu.index) == ("cpu", "cpu:0", 0)
    fresh = host.new_backend("cpu")
    assert fresh is not cpu and host.backend("cpu") is cpu
    assert fresh.identity != cpu.identity and fresh.domain != cpu.domain
    assert tf.Host().backend("cpu") is not cpu  # memoized per Host


def test_default_backend_is_available(host):
    kind = host.default_backend().split(":")[0]
    assert host.backend_status(kind).available
    assert host.default_backend() in {f"{s.kind}:0" for s in host.backend_statuses()}


def test_backend_statuses_lists_cpu_available(host):
    statuses = {s.kind: s for s in host.backend_statuses()}
    assert statuses["cpu"].available and statuses["cpu"].devices


# -- creation errors ---------
@pytest.mark.parametrize("shape", [(-1,), (2, -3), "ab", (1.5,), (True,), None, 2.0])
def test_bad_shapes(cpu, shape):
    with pytest.raises(tf.ShapeError) as info:
        cpu.empty("float32", shape)
    assert info.value.argument == "shape"
    with pytest.raises(tf.ShapeError):
        cpu.zeros("float32", shape)


@pytest.mark.parametrize("value", ["int8", np.int8, object, "nope", 3, "float128", None])
def test_bad_dtypes(cpu, value):
    with pytest.raises(tf.DTypeError) as info:
        cpu.empty(value, (2,))
    assert info.value.argument == "dtype"
    assert "float32" in str(info.value)  # the message lists what to use


def test_upload_of_an_unsupported_array(cpu):
    with pytest.raises(tf.DTypeError):
        cpu.upload(np.array(["a", "b"]))
    with pytest.raises(tf.DTypeError):
        cpu.upload(np.zeros(3, dtype=np.int8))


def test_empty_zeros_and_int_shape(cpu):
    z = cpu.zeros(tf.float64, 5)
    assert z.shape == (5,) and z.dtype is tf.float64
    assert np.array_equal(z.download(), np.zeros(5))
    e = cpu.empty("int32", (2, 3))
    assert e.shape == (2, 3) and e.strides == (1, 2) and e.is_compact()


# -- view errors ---------
def test_permute_errors(cpu):
    t = cpu.zeros("float32", (2, 3, 4))
    for axes in [(0, 1), (0, 1, 1), (0, 1, 3), (0, 1, 2, 3)]:
        with pytest.raises(tf.ShapeError, match="permutation") as info:
            t.permute(*axes)
        assert info.value.argument == "axes"


def test_index_errors(cpu):
    t = cpu.zeros("float32", (2, 3))
    with pytest.raises(tf.ShapeError, match="out of range"):
        t[2]
    with pytest.raises(tf.ShapeError, match="out of range"):
        t[0, -4]
    with pytest.raises(tf.ShapeError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(tf.ValidationError, match=r"at most one '\.\.\.'"):
        t[..., ...]
    for key in [None, 1.0, True, [0, 1], np.array([0])]:
        with pytest.raises(tf.ValidationError, match="basic slicing"):
            t[key]


def test_download_by_another_runtime(host, each_backend, each_rt):
    t = each_rt.zeros("float32", (2,))
    with pytest.raises(tf.ValidationError, match="belongs to"):
        host.new_backend(each_backend).download(t)


def test_canonicalize_of_a_foreign_tensor(host, each_backend, each_rt):
    t = host.new_backend(each_backend).zeros("float32", (2,))
    with pytest.raises(tf.ForeignRuntimeError, match="not owned by this session's runtime"):
        each_rt.canonicalize(t)


# -- op dispatch errors ---------
def test_unknown_op_lists_registered_ones(host):
    with pytest.raises(tf.ValidationError, match=r"no op named 'nope.op'") as info:
        host.run("nope.op")
    assert ADD in str(info.value)


def test_op_arity_and_attributes(host, each_rt):
    a = each_rt.zeros("float32", (3,))
    with pytest.raises(tf.ValidationError, match="takes 2 tensors") as info:
        host.run(ADD, a)
    assert info.value.op == ADD
    with pytest.raises(tf.ValidationError, match="takes 2 tensors"):
        host.run(ADD, a, a, a)
    with pytest.raises(tf.ValidationError, match="no attributes") as info:
        host.run(ADD, a, a, alpha=2.0)
    assert info.value.argument == "alpha"
    with pytest.raises(tf.ValidationError, match="got no tensors"):
        host.run(ADD)


def test_host_arrays_must_be_uploaded_first(host, each_rt):
    a = each_rt.zeros("float32", (3,))
    with pytest.raises(tf.ForeignRuntimeError, match="upload it first"):
        host.run(ADD, np.zeros(3, np.float32), a)
    with pytest.raises(tf.ForeignRuntimeError, match="upload it first"):
        host.run(ADD, a, np.zeros(3, np.float32))
    with pytest.raises(tf.ValidationError, match="must be a Tensor"):
        host.run(ADD, a, 3)


def test_tensor_of_another_runtime_is_foreign(host, each_backend, each_rt):
    other = host.new_backend(each_backend)
    a, b = each_rt.zeros("float32", (3,)), other.zeros("float32", (3,))
    with pytest.raises(tf.ForeignRuntimeError, match="input 'rhs' lives on") as info:
        host.run(ADD, a, b)
    assert info.value.op == ADD
    with pytest.raises(tf.ForeignRuntimeError):
        host.run(ADD, b, b, backend=each_backend)
    with each_rt.session() as s:
        with pytest.raises(tf.ForeignRuntimeError):
            s.exec_session().run(ADD, a, b)


def test_run_on_a_named_backend(host, each_backend, each_rt):
    a = each_rt.upload(np.arange(3, dtype=np.float32))
    on = f"{each_backend}:0"
    assert host.run(ADD, a, a, backend=on).download().tolist() == [0.0, 2.0, 4.0]


def test_a_raising_probe_makes_the_backend_unavailable_not_the_host(host):
    def probe():
        raise RuntimeError("probe exploded")

    view = host.registry.staging("broken-provider")
    view.add_backend(tf.BackendProvider("broken", probe, lambda host, index: None))
    view.commit()
    status = host.backend_status("broken")
    assert not status.available
    assert status.reason == "probing the backend failed: RuntimeError: probe exploded"
    assert "broken" in [s.kind for s in host.backend_statuses()]
    with pytest.raises(tf.UnsupportedError, match="probe exploded") as info:
        host.backend("broken")
    assert isinstance(info.value.__cause__, RuntimeError)

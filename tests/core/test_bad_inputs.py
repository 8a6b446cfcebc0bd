"""Wrong inputs to tensors, CPU runtimes and ``host.run``: each a typed error that says what to do.

Without these checks each case raised numpy's or Python's own exception (ValueError, TypeError,
OverflowError, BufferError, RuntimeError) from inside the host.
"""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf

HOST = tf.Host()
CPU = HOST.backend("cpu")


@pytest.fixture
def t() -> tf.Tensor:
    return CPU.upload(np.arange(60, dtype=np.float32).reshape(3, 4, 5))


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (slice(None, None, 0), "step 0"),
        (slice(None, 1.5), "not an integer"),
        (slice(0.0, 2), "not an integer"),
        (slice(None, None, True), "not an integer"),
        (np.array([0, 1]), "basic slicing"),
        ([0, 1], "basic slicing"),
        (1.0, "basic slicing"),
    ],
)
def test_an_index_outside_basic_slicing_is_a_validation_error(t, key, words):
    with pytest.raises(tf.ValidationError, match=words) as info:
        t[key]
    assert info.value.argument == "key"


def test_an_index_array_beside_an_ellipsis_is_refused_not_compared(t):
    with pytest.raises(tf.ValidationError, match="basic slicing"):
        t[..., np.array([0, 1])]


@pytest.mark.parametrize("axes", [(1.0, 0.0, 2.0), ("a", 1, 2), (True, False, 2), (0, 1)])
def test_permute_axes_must_be_integers_forming_a_permutation(t, axes):
    with pytest.raises(tf.ShapeError, match="permutation") as info:
        t.permute(*axes)
    assert info.value.argument == "axes"


def test_permute_takes_numpy_integers(t):
    v = t.permute(np.int64(2), np.int32(0), 1)
    assert v.shape == (5, 3, 4)
    np.testing.assert_array_equal(v.download(), t.download().transpose(2, 0, 1))


@pytest.mark.parametrize("step", [2**62, -(2**62), 2**70])
def test_a_huge_step_selects_one_element_and_downloads(t, step):
    v = t[::step]
    expected = t.download()[::step]
    assert v.shape == expected.shape == (1, 4, 5)
    np.testing.assert_array_equal(v.download(), expected)


@pytest.mark.parametrize("data", [[[1.0], [2.0, 3.0]], [[1, 2], 3]])
def test_a_ragged_upload_is_a_validation_error(data):
    with pytest.raises(tf.ValidationError, match="rectangular") as info:
        CPU.upload(data)
    assert info.value.argument == "array"


@pytest.mark.parametrize("x", [None, 3, "abc", [1, 2]])
def test_from_dlpack_of_a_non_buffer_names_what_it_needs(x):
    with pytest.raises(tf.ValidationError, match="__dlpack__") as info:
        CPU.from_dlpack(x)
    assert info.value.argument == "x"


def test_from_dlpack_of_a_big_endian_array_says_how_to_convert():
    with pytest.raises(tf.ValidationError, match="byte-order") as info:
        CPU.from_dlpack(np.arange(3, dtype=">f4"))
    assert isinstance(info.value.__cause__, BufferError)


@pytest.mark.parametrize("stream", [5, 0, -1])
def test_a_cpu_tensor_exports_without_a_stream_only(t, stream):
    with pytest.raises(tf.ValidationError, match="stream=None") as info:
        t.__dlpack__(stream=stream)
    assert info.value.argument == "stream"
    np.testing.assert_array_equal(np.from_dlpack(t), t.download())


# Sizes no machine can hold: a size that merely exceeds this machine's memory can succeed
# lazily under memory overcommit (the GPU machine has it) and then be killed when touched.
@pytest.mark.parametrize(
    "shape", [(2**40, 2**40), (2**62,), (2**61,)], ids=["2^80", "2^62", "2^61"]
)
def test_a_cpu_allocation_beyond_memory_is_out_of_memory_with_the_bytes(shape):
    nbytes = int(np.prod(shape, dtype=object)) * 4
    with pytest.raises(tf.OutOfMemoryError) as info:
        CPU.zeros("float32", shape)
    assert info.value.nbytes == nbytes
    assert str(nbytes) in str(info.value)
    assert CPU.zeros("float32", (3,)).download().tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", [["x"], None, 3, ("ext_add_kernel", "add")])
def test_an_op_name_that_is_not_a_string_is_a_validation_error(name):
    with pytest.raises(tf.ValidationError, match="op name is a string") as info:
        HOST.run(name, CPU.zeros("float32", (2,)))
    assert info.value.argument == "name"

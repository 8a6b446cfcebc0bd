"""The interpreter checks each index of ``a[i, j]`` against its own dimension, not the view's
linear span: on a (3, 4) view of a (5, 4) tensor ``x[3, 0]`` is storage row 3, inside the span
but not the view, and a GPU would quietly read it. Likewise shared arrays of more dimensions,
the linear index of a strided 1-D view (a stride of 0 spans one element), ``K.load4`` through
such a view, and atomics; reads and writes alike."""

from __future__ import annotations

import numpy as np
import pytest
from support.source_marks import marker_position
from support.webgpu_harness import View, on_interpreter

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.errors import ValidationError


@K.kernel
def read_at(out: K.Array[K.f32], x: K.Array[K.f32], i: K.i32, j: K.i32):
    if K.UNIT_POS == 0:
        out[0] = x[i, j]  # READ


@K.kernel
def write_at(out: K.Array[K.f32], i: K.u32, j: K.u32):
    if K.UNIT_POS == 0:
        out[i, j] = 1.0  # WRITE


@K.kernel
def shared_tile_at(out: K.Array[K.f32], i: K.u32, j: K.u32):
    t = K.shared(K.f32, (4, 5))
    u = K.UNIT_POS
    if u < 20:
        t[u % 4, u // 4] = K.f32(u)
    K.sync_cube()
    if u == 0:
        out[0] = t[i, j]  # SHARED READ
        t[j, i] = 0.0  # SHARED WRITE


@K.kernel
def shared_atomic_at(out: K.Array[K.u32], i: K.u32):
    t = K.shared(K.u32, (4, 5))
    u = K.UNIT_POS
    if u < 20:
        t[u % 4, u // 4] = K.u32(0)
    K.sync_cube()
    if u == 0:
        K.atomic_add(t, (i, 0), K.u32(1))  # ATOMIC
    K.sync_cube()
    if u < 20:
        out[u] = t[u % 4, u // 4]


@K.kernel
def linear_at(out: K.Array[K.f32], x: K.Array[K.f32], k: K.u32):
    if K.UNIT_POS == 0:
        out[0] = x[k]  # LINEAR


@K.kernel
def load4_at(out: K.Array[K.f32], x: K.Array[K.f32], k: K.u32):
    if K.UNIT_POS == 0:
        a, b, c, d = K.load4(x, k)  # LOAD4
        out[0] = a + b + c + d


def refused(kern: K.Kernel, marker: str, match: str, *args: object) -> ValidationError:
    """The ValidationError of one launch of ``kern`` (a cube of 32 units), raised at the line
    of ``marker``."""
    with pytest.raises(ValidationError, match=match) as info:
        on_interpreter(kern, 1, 32, *args)
    line, _ = marker_position(kern, marker)
    assert f"{kern.parsed.filename}:{line}:" in str(info.value)
    return info.value


def test_a_row_past_a_view_of_a_taller_tensor_is_refused_through_the_cpu_session() -> None:
    cpu = tf.Host().backend("cpu")
    big = cpu.upload(np.arange(20, dtype=np.float32).reshape(5, 4))
    x = big[:3, :]
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.bounds") as js:
        out = js.alloc_output("float32", (1,))
        js.launch(read_at, 1, 32, out, x, 2, 3)  # the last element of the view
        assert out.download()[0] == 11
        with pytest.raises(ValidationError) as info:
            js.launch(read_at, 1, 32, out, x, 3, 0)
    err = info.value
    assert "index 3 along dimension 0 of array 'x' is out of bounds (x.shape[0] is 3)" in str(err)
    assert err.argument == "x"
    assert f"{read_at.parsed.filename}:{marker_position(read_at, 'READ')[0]}:" in str(err)


def test_each_dimension_is_checked_and_a_negative_index_reads_as_such() -> None:
    storage = np.arange(20, dtype=np.float32)
    out = View.compact(np.zeros(1, np.float32))
    transposed = View(storage, 0, (4, 3), (5, 1))  # (5, 4)[:3, :].T: its span is 18 elements
    refused(
        read_at,
        "READ",
        r"index 3 along dimension 1 of array 'x' .*x.shape\[1\] is 3",
        out,
        transposed,
        np.int32(0),
        np.int32(3),
    )
    refused(
        read_at,
        "READ",
        r"index -1 along dimension 0 of array 'x'",
        out,
        transposed,
        np.int32(-1),
        np.int32(1),
    )


def test_a_write_past_a_dimension_is_refused_and_writes_nothing() -> None:
    storage = np.zeros(20, np.float32)
    view = View(storage, 0, (3, 4), (1, 5))
    with pytest.raises(ValidationError, match=r"index 3 along dimension 0 of array 'out'"):
        on_interpreter(write_at, 1, 32, view, np.uint32(3), np.uint32(0))
    (got,) = on_interpreter(write_at, 1, 32, view, np.uint32(2), np.uint32(3))
    assert np.flatnonzero(got).tolist() == [2 + 3 * 5]


@pytest.mark.parametrize("marker", ["SHARED READ", "SHARED WRITE"])
def test_a_shared_array_checks_each_dimension(marker: str) -> None:
    out = View.compact(np.zeros(1, np.float32))
    if marker == "SHARED READ":
        refused(
            shared_tile_at,
            marker,
            r"index 4 along dimension 0 of shared array 't' .*t.shape\[0\] is 4",
            out,
            np.uint32(4),
            np.uint32(0),
        )
    else:  # the read (element (3, 4)) is in bounds, the write after it (at (4, 3)) is not
        refused(
            shared_tile_at,
            marker,
            r"index 4 along dimension 0 of shared array 't'",
            out,
            np.uint32(3),
            np.uint32(4),
        )
    (got,) = on_interpreter(shared_tile_at, 1, 32, out, np.uint32(3), np.uint32(3))
    assert got[0] == 3 + 4 * 3


def test_an_atomic_past_a_dimension_of_a_shared_array_is_refused() -> None:
    out = View.compact(np.zeros(32, np.uint32))
    refused(
        shared_atomic_at,
        "ATOMIC",
        r"index 4 along dimension 0 of shared array 't'",
        out,
        np.uint32(4),
    )
    (got,) = on_interpreter(shared_atomic_at, 1, 32, out, np.uint32(3))
    assert got[3] == 1 and got.sum() == 1


def test_a_linear_index_of_a_broadcast_view_is_bounded_by_its_length() -> None:
    storage = np.array([7.0], np.float32)
    out = View.compact(np.zeros(1, np.float32))
    broadcast = View(storage, 0, (6,), (0,))  # six views of one element
    (got, _) = on_interpreter(linear_at, 1, 32, out, broadcast, np.uint32(5))
    assert got[0] == 7
    refused(
        linear_at,
        "LINEAR",
        r"index 6 along dimension 0 of array 'x' .*x.shape\[0\] is 6",
        out,
        broadcast,
        np.uint32(6),
    )
    refused(
        load4_at, "LOAD4", r"index 6 along dimension 0 of array 'x'", out, broadcast, np.uint32(1)
    )

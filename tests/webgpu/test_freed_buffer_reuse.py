"""The WebGPU runtime reuses freed buffers (its free list): a collected tensor's buffer serves
the next allocation of its size without ``create_buffer`` and keeps its cached bind groups; the
free list is bounded, ``trim()`` and the out-of-memory retry destroy what it keeps, a buffer never
moves to another runtime, and an upload into a reused buffer never runs before unsubmitted
commands that used it.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from support.kernels import add

import tenferro_host as tf

POOL_KEYS = {"cached_bytes", "cached_blocks", "cache_hits", "cache_misses"}


def _launch_add(js: Any, out: Any, x: Any, y: Any) -> None:
    js.launch(add, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x, y)


def _add(rt: Any, out: Any, x: Any, y: Any) -> None:
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.freed_buffer_reuse") as js:
        _launch_add(js, out, x, y)


class CreateCounter:
    """Wraps a runtime's ``device.create_buffer``, counting the calls."""

    def __init__(self, rt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = rt._device.create_buffer

        def create_buffer(**kwargs: Any) -> Any:
            self.calls += 1
            return original(**kwargs)

        monkeypatch.setattr(rt._device, "create_buffer", create_buffer)


def _free(*tensors: Any) -> None:
    """Let the tensors passed (temporaries: no other reference) be collected."""
    del tensors
    gc.collect()


def test_a_freed_buffer_serves_the_next_allocation_of_its_size(
    fresh_rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = fresh_rt
    assert set(rt.pool_stats()) == POOL_KEYS
    count = CreateCounter(rt, monkeypatch)
    x = rt.upload(np.arange(1000, dtype=np.float32))
    buffer = weakref.ref(x.storage.buffer)
    assert count.calls == 1
    del x
    gc.collect()
    stats = rt.pool_stats()
    assert stats["cached_blocks"] == 1 and stats["cached_bytes"] == 4000
    y = rt.empty("float32", (1000,))
    assert count.calls == 1, "the second allocation of a size called create_buffer"
    assert y.storage.buffer is buffer()
    stats = rt.pool_stats()
    assert stats["cached_blocks"] == 0 and stats["cache_hits"] == 1
    z = rt.empty("float32", (1000,))  # y still holds the pooled one: a new buffer
    assert count.calls == 2 and z.storage.buffer is not y.storage.buffer
    other = rt.empty("float32", (999,))  # another size: another class
    assert (
        other.storage.buffer.size == 3996
        and count.calls == 3
        and rt.pool_stats()["cache_misses"] == 3
    )  # x, z, other


def test_a_reused_buffer_keeps_its_bind_groups_and_computes_right(fresh_rt: Any) -> None:
    rt = fresh_rt
    x = rt.upload(np.arange(256, dtype=np.float32))
    out = rt.empty("float32", (256,))
    _add(rt, out, x, x)
    groups, misses, hits = len(rt.bind_groups), rt.bind_groups.misses, rt.bind_groups.hits
    np.testing.assert_array_equal(out.download(), 2 * np.arange(256))
    del out
    gc.collect()
    assert len(rt.bind_groups) == groups  # the buffer went to the pool: its group stays
    out2 = rt.empty("float32", (256,))  # the same buffer object: the same key, the same group
    _add(rt, out2, x, x)
    assert rt.bind_groups.misses == misses and rt.bind_groups.hits == hits + 1
    np.testing.assert_array_equal(out2.download(), 2 * np.arange(256))


def test_the_pool_stays_within_its_bound_and_releases_the_rest(fresh_rt: Any) -> None:
    rt = fresh_rt
    rt.pool.max_bytes = 2 * 4000
    x = rt.upload(np.arange(1000, dtype=np.float32))
    outs = [rt.empty("float32", (1000,)) for _ in range(3)]
    for out in outs:
        _add(rt, out, x, x)
    rt.synchronize()
    groups = len(rt.bind_groups)
    refs = [weakref.ref(out.storage.buffer) for out in outs]
    del outs, out
    gc.collect()
    stats = rt.pool_stats()
    assert stats["cached_blocks"] == 2 and stats["cached_bytes"] == 8000
    assert len(rt.bind_groups) == groups - 1  # the released buffer's group went with it
    gc.collect()
    assert sum(ref() is None for ref in refs) == 1, "the buffer beyond the bound is still held"


def test_a_buffer_above_max_block_bypasses_the_pool(fresh_rt: Any) -> None:
    rt = fresh_rt
    rt.pool.max_block = 1024
    big = rt.upload(np.ones(1000, np.float32))  # 4000 bytes
    x = rt.upload(np.ones(1000, np.float32))
    _add(rt, big, x, x)
    rt.synchronize()
    groups = len(rt.bind_groups)
    ref = weakref.ref(big.storage.buffer)
    del big
    gc.collect()
    assert rt.pool_stats()["cached_blocks"] == 0 and ref() is None
    assert len(rt.bind_groups) == groups - 1


def test_trim_destroys_the_pooled_buffers(fresh_rt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = fresh_rt
    x = rt.upload(np.arange(100, dtype=np.float32))
    outs = [rt.zeros("float32", (100 + i,)) for i in range(3)]  # three sizes: three classes
    for out in outs:
        _add(rt, out, out, out)
    rt.synchronize()
    groups = len(rt.bind_groups)
    refs = [weakref.ref(out.storage.buffer) for out in outs]
    pooled = {id(out.storage.buffer) for out in outs}
    destroyed: list[int] = []
    cls = type(outs[0].storage.buffer)
    original = cls.destroy

    def destroy(buffer: Any) -> None:
        destroyed.append(id(buffer))
        original(buffer)

    monkeypatch.setattr(cls, "destroy", destroy)
    del outs, out
    gc.collect()
    assert rt.pool_stats()["cached_blocks"] == 3 and len(rt.bind_groups) == groups
    rt.trim()
    stats = rt.pool_stats()
    assert stats["cached_blocks"] == 0 and stats["cached_bytes"] == 0
    assert set(destroyed) == pooled and len(rt.bind_groups) == groups - 3
    gc.collect()
    assert all(ref() is None for ref in refs)
    count = CreateCounter(rt, monkeypatch)
    again = rt.zeros("float32", (100,))  # nothing pooled: a new buffer, correct contents
    assert count.calls == 1
    _add(rt, again, x, x)
    np.testing.assert_array_equal(again.download(), 2 * np.arange(100))


def test_an_upload_into_a_reused_buffer_runs_after_the_pending_kernel_that_read_it(
    fresh_rt: Any,
) -> None:
    """The ordering rule: X is read by a launch still unsubmitted (the session holds the
    batch); X is dropped and Y of its size, uploaded, gets X's buffer. ``write_buffer`` would
    run at the start of the next submit, before that launch: the upload must submit it first."""
    rt = fresh_rt
    old, new = np.arange(1000, dtype=np.float32), np.full(1000, -7, np.float32)
    out = rt.empty("float32", (1000,))
    x = rt.upload(old)
    rt.synchronize()
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.freed_buffer_reuse") as js:
        _launch_add(js, out, x, x)
        assert rt.queue.pending
        buffer = weakref.ref(x.storage.buffer)
        del x
        gc.collect()
        submissions = rt.queue.submissions
        y = rt.upload(new)
        assert y.storage.buffer is buffer(), "the test needs Y to reuse X's buffer"
        assert rt.queue.submissions == submissions + 1  # the pending launch went first
    np.testing.assert_array_equal(out.download(), 2 * old)
    np.testing.assert_array_equal(y.download(), new)


def test_an_upload_into_a_reused_buffer_is_not_overwritten_by_the_pending_kernel(
    fresh_rt: Any,
) -> None:
    """The other hazard: a pending launch *writes* X; X's buffer goes to Y's upload."""
    rt = fresh_rt
    a = rt.upload(np.ones(500, np.float32))
    new = np.arange(500, dtype=np.float32)
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.freed_buffer_reuse") as js:
        x = js.alloc_output("float32", (500,))
        _launch_add(js, x, a, a)
        buffer = weakref.ref(x.storage.buffer)
        del x
        gc.collect()
        y = rt.upload(new)
        assert y.storage.buffer is buffer()
    np.testing.assert_array_equal(y.download(), new)


def test_reuse_by_later_commands_of_the_same_batch_needs_no_submit(fresh_rt: Any) -> None:
    """Commands recorded after the reuse are ordered after the earlier ones in the encoder:
    an output reusing a buffer a pending launch reads costs no extra submit."""
    rt = fresh_rt
    values = np.arange(300, dtype=np.float32)
    first = rt.empty("float32", (300,))
    x = rt.upload(values)
    rt.synchronize()
    submissions = rt.queue.submissions
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.freed_buffer_reuse") as js:
        _launch_add(js, first, x, x)
        buffer = weakref.ref(x.storage.buffer)
        del x
        gc.collect()
        second = js.alloc_output("float32", (300,))
        assert second.storage.buffer is buffer()
        _launch_add(js, second, first, first)  # overwrites what the first launch read
        zeroed = rt.zeros("float32", (300,))  # a clear: recorded in the same encoder
    assert rt.queue.submissions == submissions + 1  # the one batch
    np.testing.assert_array_equal(first.download(), 2 * values)
    np.testing.assert_array_equal(second.download(), 4 * values)
    np.testing.assert_array_equal(zeroed.download(), np.zeros(300, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "bool"])
def test_zeros_and_upload_on_reused_buffers(fresh_rt: Any, dtype: str) -> None:
    rt = fresh_rt
    rng = np.random.default_rng(0)
    for size in (1, 3, 257, 1000):  # bool: 4 device bytes per element, like the 32-bit types
        dirty = rt.upload(np.ones(size, np.float32))
        hits = rt.pool_stats()["cache_hits"]
        del dirty
        gc.collect()
        zeros = rt.zeros(dtype, (size,))
        assert rt.pool_stats()["cache_hits"] == hits + 1
        np.testing.assert_array_equal(zeros.download(), np.zeros(size, dtype))
        del zeros
        gc.collect()
        values = rng.integers(0, 2, size) if dtype == "bool" else rng.integers(-9, 9, size)
        data = values.astype(dtype)
        up = rt.upload(data)
        assert rt.pool_stats()["cache_hits"] == hits + 2
        np.testing.assert_array_equal(up.download(), data)


def test_a_buffer_never_moves_to_another_runtimes_pool(
    webgpu_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = webgpu_host.new_backend("webgpu"), webgpu_host.new_backend("webgpu")
    x = one.upload(np.arange(1000, dtype=np.float32))
    buffer = x.storage.buffer
    del x
    gc.collect()
    assert one.pool_stats()["cached_blocks"] == 1 and two.pool_stats()["cached_blocks"] == 0
    count = CreateCounter(two, monkeypatch)
    y = two.upload(np.arange(1000, dtype=np.float32))
    assert count.calls == 1 and y.storage.buffer is not buffer
    assert two.pool_stats()["cache_hits"] == 0 and one.pool_stats()["cached_blocks"] == 1
    del y
    gc.collect()
    assert two.pool_stats()["cached_blocks"] == 1 and one.pool_stats()["cached_blocks"] == 1
    z = one.empty("float32", (1000,))
    assert z.storage.buffer is buffer and z.storage.runtime is one


def test_out_of_memory_frees_the_pool_and_retries_once(
    fresh_rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = fresh_rt
    kept = rt.upload(np.arange(10, dtype=np.float32))
    _free(rt.empty("float32", (100,)), rt.empty("float32", (200,)))
    assert rt.pool_stats()["cached_blocks"] == 2
    original, calls = rt._device.create_buffer, []

    def full_once(**kwargs: Any) -> Any:
        calls.append(kwargs["size"])
        if len(calls) == 1:
            raise rt._wgpu.GPUOutOfMemoryError("Out of memory")
        return original(**kwargs)

    monkeypatch.setattr(rt._device, "create_buffer", full_once)
    t = rt.upload(np.arange(300, dtype=np.float32))
    assert calls == [1200, 1200] and rt.pool_stats()["cached_blocks"] == 0
    np.testing.assert_array_equal(t.download(), np.arange(300, dtype=np.float32))

    def full(**_: Any) -> Any:
        calls.append(0)
        raise rt._wgpu.GPUOutOfMemoryError("Out of memory")

    _free(rt.empty("float32", (50,)))
    monkeypatch.setattr(rt._device, "create_buffer", full)
    del calls[:]
    with pytest.raises(tf.OutOfMemoryError) as err:
        rt.empty("float32", (1000,))
    assert len(calls) == 2 and err.value.nbytes == 4000  # retried once, after freeing the pool
    assert rt.pool_stats()["cached_blocks"] == 0
    monkeypatch.undo()
    np.testing.assert_array_equal(kept.download(), np.arange(10, dtype=np.float32))


def test_a_tensor_collected_in_a_reference_cycle_pools_a_live_buffer(fresh_rt: Any) -> None:
    """The collector finalizes everything a dead cycle reaches, the tensor's wgpu buffer too
    (wgpu-py releases it then), while the storage's finalizer hands that buffer to the pool:
    the runtime holds its poolable buffers, so the next tensor of the size gets a live one
    (it got a released one, and its upload raised wgpu-py's TypeError)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(8):
            box: list[Any] = [fresh_rt.upload(np.ones(3, np.float32))]
            box.append(box)
            del box
        gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    x = np.arange(3, dtype=np.float32)
    for _ in range(8):
        np.testing.assert_array_equal(fresh_rt.upload(x).download(), x)
    assert fresh_rt.pool_stats()["cache_hits"] >= 8

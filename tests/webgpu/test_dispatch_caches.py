"""The per-dispatch caches of the WebGPU runtime: uniform buffers and bind groups.

A repeated launch reuses both (fewer wgpu-py calls per dispatch); a freed tensor evicts the bind
groups binding its buffer, so the cache neither keeps its memory alive nor binds it again; both
caches stay within their bound; a scalar's uniform entry is keyed by its bits (-0.0 is not 0.0).
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
from support.kernels import add

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import _op_plan


@K.kernel
def fill(out: K.Array[K.f32], value: K.f32):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = value


def _add(rt: Any, out: Any, x: Any, y: Any) -> None:
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.caches") as js:
        js.launch(add, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x, y)


def _weak_buffer(t: Any) -> Any:
    """A weak reference to a tensor's wgpu buffer, or None where wgpu-py objects take none."""
    try:
        return weakref.ref(t.storage.buffer)
    except TypeError:
        return None


def test_a_repeated_launch_reuses_its_uniform_buffer_and_bind_group(fresh_rt: Any) -> None:
    rt = fresh_rt
    x = rt.upload(np.arange(300, dtype=np.float32))
    out = rt.empty("float32", (300,))
    _add(rt, out, x, x)
    uniforms, groups = len(rt.uniforms), len(rt.bind_groups)
    u_hits, g_hits = rt.uniforms.hits, rt.bind_groups.hits
    for _ in range(3):
        _add(rt, out, x, x)
    assert (len(rt.uniforms), len(rt.bind_groups)) == (uniforms, groups)
    # The second launch is recorded into the launch's plan, which holds its uniform buffer:
    # later ones replay the plan without looking it up (each full path looks it up).
    looked_up = 1 if _op_plan.ENABLED else 3
    assert rt.uniforms.hits == u_hits + looked_up and rt.bind_groups.hits == g_hits + 3
    np.testing.assert_array_equal(out.download(), 2 * np.arange(300))
    # Other views of the same storages: another uniform block, so another group binding it.
    _add(rt, out[:100], x[100:200], x[:100])
    assert len(rt.uniforms) == uniforms + 1 and len(rt.bind_groups) == groups + 1
    np.testing.assert_array_equal(out.download()[:100], np.arange(100, 200) + np.arange(100))


def test_launches_of_one_batch_sharing_a_bind_group_each_see_their_inputs(fresh_rt: Any) -> None:
    rt = fresh_rt
    one = rt.upload(np.ones(64, np.float32))
    acc = rt.zeros("float32", (64,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.caches") as js:
        for _ in range(4):  # same pipeline, same group: set once, dispatched four times
            js.launch(add, 1, 64, acc, acc, one)
    np.testing.assert_array_equal(acc.download(), np.full(64, 4, np.float32))


def test_freeing_a_tensor_evicts_its_bind_groups(fresh_rt: Any) -> None:
    """A freed tensor's buffer goes to the runtime's pool with its bind groups (a group names
    the buffer, whichever tensor owns it); trim() releases both for good."""
    rt = fresh_rt
    x = rt.upload(np.arange(50, dtype=np.float32))
    out = rt.empty("float32", (50,))
    _add(rt, out, x, x)
    before = len(rt.bind_groups)
    buffer = _weak_buffer(out)
    rt.synchronize()
    del out
    gc.collect()
    rt.trim()
    assert len(rt.bind_groups) == before - 1
    if buffer is not None:
        assert buffer() is None, "a freed tensor's buffer is still held"
    # The input's next launch binds a new output: a miss, correct results.
    misses = rt.bind_groups.misses
    out2 = rt.empty("float32", (50,))
    _add(rt, out2, x, x)
    assert rt.bind_groups.misses == misses + 1
    np.testing.assert_array_equal(out2.download(), 2 * np.arange(50))


def test_the_caches_stay_within_their_bound(fresh_rt: Any) -> None:
    rt = fresh_rt
    rt.bind_groups.max_entries = 2
    rt.uniforms.max_entries = 2
    x = rt.upload(np.arange(40, dtype=np.float32))
    outs = [rt.empty("float32", (40 - i,)) for i in range(5)]  # all alive: only the bound evicts
    for out in outs:
        _add(rt, out, x, x)
    assert len(rt.bind_groups) == 2 and len(rt.uniforms) == 2
    assert rt.bind_groups.evictions >= 3
    for i, out in enumerate(outs):
        _add(rt, out, x, x)  # evicted entries are made again
        np.testing.assert_array_equal(out.download(), 2 * np.arange(40 - i))
    del outs, out
    gc.collect()
    rt.trim()  # the freed buffers sat in the pool with their groups
    assert len(rt.bind_groups) == 0


def test_a_scalar_uniform_is_keyed_by_its_bits(fresh_rt: Any) -> None:
    rt = fresh_rt
    out = rt.empty("float32", (8,))
    for value in (0.0, -0.0, 0.0):
        with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.caches") as js:
            js.launch(fill, 1, 8, out, value)
        got = out.download()
        assert (np.signbit(got) == np.signbit(np.float32(value))).all(), value

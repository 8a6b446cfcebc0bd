"""The CUDA JIT session's launch plans, over the recording driver stand-in: the base's plans on
the same mechanism as an op call's. A launch key's first launch takes the full path, its second
is recorded by the raw seam, and from the third on a launch is the runtime's op replay of that
recording (slot writes and one ``cuLaunchKernel``), in any jit session of the runtime."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from support.call_budget import calls_per_op
from support.driver_stand_in import (
    launch_words,
    recorded_launches,
    recording_driver,
    stand_in_module,
    stand_in_runtime,
)
from tenferro_host_cuda_jit._codegen import kernel_abi

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.benchmarks.kernels import dsl_add
from tenferro_host.provider import OpReplay, _op_plan

OP = "tests.cuda_launch_plan"
#: Python calls of the README block (``with ex.jit(op) as js``, ``alloc_output``,
#: ``cube_count_1d``, ``cube_dim_1d``, a planned ``launch``, the exit) on the stand-in, its
#: driver calls included: 49 planned (88 while the raw sub-session opened with the jit
#: session, 68 while ``alloc_output`` passed the queued block through the free list, 55 while
#: the session read the device's limits when opened); 265 on the full path (the raw session,
#: its borrows and launch among them); 51 (53 on the pure-Python call) and 270 counted by
#: ``calls_per_op`` (its lambda one call more, every function's code counted on its own).
BLOCK_PLANNED, BLOCK_FULL_PATH = 54, 270


@pytest.fixture
def setup() -> Any:
    host = tf.Host()
    with recording_driver() as fake, recorded_launches() as launches:
        rt = stand_in_runtime(host)
        spec = dsl_add.specialize([K.ArrayDesc(dtypes.float32, 1)] * 3, {}, "cuda", ("sm_90",))
        module = stand_in_module(rt, tuple(p.nbytes for p in kernel_abi(spec)))
        rt.resources.get(("tenferro_host_cuda_jit", spec.key, "1d"), lambda: module)
        yield rt, fake, launches


def block(ex: Any, a: Any, b: Any) -> Any:
    """The README's block: a jit session, an output, one launch."""
    with ex.jit(OP) as js:
        out = js.alloc_output(tf.float32, a.shape)
        js.launch(dsl_add, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, a, b)
    return out


def planned(rt: Any) -> tuple[Any, Any]:
    """Two inputs whose README-block launch key is planned (three blocks run)."""
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    with rt.session() as s:
        ex = s.exec_session()
        for _ in range(3):
            block(ex, a, b)
    return a, b


def replayed(fake: Any) -> list[list[int]]:
    """The parameter words of each ``cuLaunchKernel`` so far (an op replay's launches)."""
    return [launch_words(arg[4]) for name, arg in fake.calls if name == "cuLaunchKernel"]


def test_the_readme_block_replays_its_launch_from_the_third_on(setup: Any) -> None:
    rt, fake, launches = setup
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    with rt.session() as s:
        ex = s.exec_session()
        outs = [block(ex, a, b) for _ in range(5)]
    planned = _op_plan.ENABLED
    assert len(launches) == (2 if planned else 5)  # the full path: cuda.core's launch
    words = replayed(fake)  # (each the block as the last launch left it)
    assert len(words) == (3 if planned else 0)
    if planned:  # out, lhs, rhs: each its storage
        ptrs = [words[-1][i] for i, p in enumerate(kernel_abi_of(rt)) if p.role == "data"]
        assert ptrs == [outs[-1].storage.ptr, a.storage.ptr, b.storage.ptr]
    plans = [p for p in rt.launch_plans.values() if isinstance(p, OpReplay)]
    assert len(plans) == (1 if planned else 0)


def kernel_abi_of(rt: Any) -> Any:
    spec = dsl_add.specialize([K.ArrayDesc(dtypes.float32, 1)] * 3, {}, "cuda", ("sm_90",))
    return kernel_abi(spec)


def test_a_view_is_keyed_by_its_offset_and_bound_to_its_own_storage(setup: Any) -> None:
    """The key holds each view's offset (its metadata words are part of the plan), the replay
    writes each call's storage address (element 0: the offset is the kernel's)."""
    rt, fake, launches = setup
    big, other = rt.empty(tf.float32, (2048,)), rt.empty(tf.float32, (2048,))
    with rt.session() as s:
        ex = s.exec_session()
        for _ in range(3):
            block(ex, big[8:1032], big[1024:2048])
        fake.calls.clear()
        block(ex, other[8:1032], other[1024:2048])  # another storage, the same views: replayed
        assert len(replayed(fake)) == (1 if _op_plan.ENABLED else 0)
        launched = len(launches)
        block(ex, other[16:1040], other[1024:2048])  # another offset: another key
        assert len(launches) == launched + 1
    if _op_plan.ENABLED:
        abi = kernel_abi_of(rt)
        (w,) = replayed(fake)
        data = [i for i, p in enumerate(abi) if p.role == "data"]
        offsets = [i for i, p in enumerate(abi) if p.role == "offset"]
        assert [w[i] for i in data[1:]] == [other.storage.ptr] * 2
        assert [w[i] for i in offsets[1:]] == [8, 1024]


def test_a_planned_launch_is_replayed_on_the_thread_that_recorded_it(setup: Any) -> None:
    """The replay writes its parameter block per call: another thread takes the full path."""
    rt, _, launches = setup
    a, b = planned(rt)
    before = len(launches)

    def elsewhere() -> None:
        with rt.session() as s:
            block(s.exec_session(), a, b)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert len(launches) == before + 1  # the full path on the other thread
    with rt.session() as s:
        block(s.exec_session(), a, b)
    assert len(launches) == before + (1 if _op_plan.ENABLED else 2)


def test_the_readme_block_stays_within_its_call_budget(setup: Any) -> None:
    rt, fake, _ = setup
    a, b = planned(rt)
    with rt.session() as s:
        ex = s.exec_session()
        calls = calls_per_op(lambda: block(ex, a, b))
    names = Counter(fake.names())
    print(f"{calls} calls per README block on the CUDA stand-in; driver calls {dict(names)}")
    assert calls <= (BLOCK_PLANNED if _op_plan.ENABLED else BLOCK_FULL_PATH)

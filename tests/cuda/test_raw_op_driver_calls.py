"""A cuda-raw op through host.run, counted without a GPU (the driver and cuda.core's launch are
recording stand-ins): in steady state one op makes one driver call besides its launch — the
context check — with no event (modules and memory retire stream-ordered when dropped, not per
session) and no allocation reaching the driver, and it stays within its Python-call budget."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from support.call_budget import call_trace, calls_per_op
from support.driver_stand_in import ADD, launch_words, stand_in, stand_in_module

import tenferro_host as tf
from tenferro_host.provider import _op_plan

#: Call budgets of one op call (cProfile's count: Python and C calls, the stand-in driver's
#: three included), planned (a replay) and on the full path (TENFERRO_OP_PLAN=0). Planned, both
#: were 38 while a replay's output went through the free list (its lock, the deferred queue's
#: drain and the free list's put of the previous output): 21 since the replay reuses the block
#: the previous output queued and checks the context inline, 19 since the handle compares the
#: last replayed key before a dict lookup and asks the runtime's set of session threads, not the
#: per-thread one (docs/measurements/op-call-cost.md), 20 since the key and its guard are the
#: plan table's (one call, shared with a captured graph's plan); the full path 145 and 301 (147
#: and 224 before; the DSL op's was 215 while the CUDA JIT kept plans of its own, which the op
#: plan's switch left on: its launch plans are now the base's, off with the rest); 146 and 302
#: since ``allocate_bytes`` checks, then calls the allocation an op replay shares
#: (``allocate_block``); 147 and 302 since the stand-in's module is a loaded ``Module``, whose
#: ``function`` checks the kernel's name on the full path as it does on a GPU; counted by
#: ``calls_per_op`` (its lambda one call more) and per function's code, the methods every
#: dataclass generates no longer merged into one (pstats' key, whose survivor varied with the
#: process: 302 or 304 for the DSL op), 22 and 22 planned on the pure-Python call, 149 and 307;
#: the raw op's 151.01 since each of its three borrows asks ``Tensor.is_compact()`` (a plugin
#: reads no private attribute) instead of the tensor's slot; 23 planned on the pure-Python call
#: since the plan table's ``find`` hands the key of its tensors to ``lookup``, which a framework
#: bridge's prepared call keys its buffers through (``ExportedOp.prepared``).
RAW_PLANNED, RAW_FULL_PATH = 23, 151.01
#: The DSL op's full path 310 since the CUDA jit session reads the device's limits at its first
#: full-path launch, through a property, instead of when it opens (which every planned README
#: block paid for).
DSL_PLANNED, DSL_FULL_PATH = 23, 311


@pytest.fixture
def setup():
    with stand_in() as world:
        yield world


def last_launch(fake: Any, launches: list[Any]) -> tuple[Any, Any, list[int]]:
    """(kernel, grid, argument words) of the last launch, through cuda.core (the full path) or
    cuLaunchKernel (an op replay, whose parameter block the stand-in read at the call)."""
    replayed = [arg for name, arg in fake.calls if name == "cuLaunchKernel"]
    if replayed:
        handle, grid, _block, _shared, views = replayed[-1]
        return handle, grid, launch_words(views)
    _stream, config, kernel, *args = launches[-1]
    return kernel, config.grid, [int(a) for a in args]


def test_steady_state_driver_calls_of_one_op(setup):
    host, rt, fake, launches, module = setup
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    add = host.op(ADD)
    for _ in range(3):
        out = add(a, b)
    fake.calls.clear()
    launches.clear()
    for _ in range(10):
        out = add(a, b)  # the previous output is freed here: its block serves the next one
    calls = Counter(fake.names())
    launched = calls.pop("cuLaunchKernel", 0) + len(launches)
    assert calls == {"cuCtxGetCurrent": 10} and launched == 10
    assert (launches == []) is _op_plan.ENABLED  # planned: every call replayed
    kernel, grid, args = last_launch(fake, launches)
    function = module.function("add_kernel")
    assert kernel in (function.core_kernel, function.handle) and grid == (4, 1, 1)
    assert args[0] == out.storage.ptr and args[1] == a.storage.ptr and args[2] == b.storage.ptr
    assert args[3] & 0xFFFFFFFF == 1024 and out.storage.runtime is rt
    assert rt.stats()["events_recorded"] == 0 and len(rt.retirement) == 0


def test_host_run_of_a_cuda_raw_op_stays_within_its_call_budget(setup):
    """About 420 Python-level calls per op before the op-call work, 272 at the first op handle,
    140 with flattened sessions, no per-session lease and inline borrows."""
    host, rt, *_ = setup
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    for _ in range(10):
        host.run(ADD, a, b)
    calls = calls_per_op(lambda: host.run(ADD, a, b))
    print(f"{calls} calls per cuda-raw op call")
    assert calls <= (RAW_PLANNED if _op_plan.ENABLED else RAW_FULL_PATH)


def test_a_dsl_op_on_cuda_reuses_plans_across_jit_sessions(setup):
    """host.run of a dsl-only op: a new jit session per op, the module from the runtime's cache,
    layouts and configs shared; one context check per op; about 850 Python calls per op before
    the op-call work, about 390 at the first op handle, 211 with plans keeping their compiled
    function across sessions and layouts checked once per process."""
    from tenferro_host_cuda_jit._codegen import kernel_abi

    from tenferro_host import dtypes
    from tenferro_host import kernel as K
    from tenferro_host.benchmarks.kernels import DSL_OP, dsl_add, register_dsl_op

    host, rt, fake, launches, _ = setup
    register_dsl_op(host)
    spec = dsl_add.specialize([K.ArrayDesc(dtypes.float32, 1)] * 3, {}, "cuda", ("sm_90",))
    module = stand_in_module(rt, tuple(p.nbytes for p in kernel_abi(spec)))
    rt.resources.get(("tenferro_host_cuda_jit", spec.key, "1d"), lambda: module)
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    for _ in range(10):
        out = host.run(DSL_OP, a, b)
    fake.calls.clear()
    calls = calls_per_op(lambda: host.run(DSL_OP, a, b))
    print(f"{calls} calls per DSL op call")
    assert calls <= (DSL_PLANNED if _op_plan.ENABLED else DSL_FULL_PATH)
    names = Counter(fake.names())
    assert names.pop("cuLaunchKernel", 0) == (100 if _op_plan.ENABLED else 0)
    assert names == {"cuCtxGetCurrent": 100}
    out = host.run(DSL_OP, a, b)  # the last launch's output
    kernel, grid, args = last_launch(fake, launches)
    function = module.function("tfk_dsl_add")
    assert kernel in (function.core_kernel, function.handle)
    assert grid == (4, 1, 1)
    assert args[0] == out.storage.ptr and len(args) == len(function.param_sizes)


def test_host_run_of_a_cuda_raw_op_touches_few_files(setup):
    """The second host.run of the cuda-raw add, traced call by call (every Python-level call event,
    sys.setprofile): 21 files and 110 switches between consecutive calls' files before the
    structure and op-call work, 17 files (the stand-in driver among them) and 46 switches after
    it, 18 and 44 since lifetimes moved into the provider (the first call's output, collected
    during the second, queues its release in ``provider/_deferred.py``; its free list is
    ``provider/_free_list.py``), 19 and 49 since the raw session's handles have their own module
    (``_handles.py``, splitting ``raw.py``), 20 and 52 with the runtime's layouts a ``Memo`` as
    well (``_memo.py``), 20 and 54 since the queued block is reused by every allocation (not
    passed through the free list), 22 and 56 since the CUDA runtime's deferred releases
    (``_releases.py``) and the provider's exec session (``_exec_session.py``) have modules of
    their own, 23 and 56 since the stand-in's module is a loaded ``Module`` (``_module.py``), 23
    and 58 since the raw session's borrows ask ``Tensor.is_compact()``, 22 and 58 since the
    per-runtime resource cache is one of the host's memos (``_memo.py``, not a module of its own);
    that is the full path (TENFERRO_OP_PLAN=0). A planned call was 12 files and 15 switches, 8
    and 7 (each file entered once) since its output's block is reused without the free list and
    the context checked inline, 9 and 8 since the key is the plan table's, 11 and 10 since the
    output comes from the base replay's allocation and the runtime's (``allocate_block``: the
    reuse of the queued block is every allocation's, not the replay's own); printed with -s."""
    host, rt, *_ = setup
    a, b = rt.empty(tf.float32, (1024,)), rt.empty(tf.float32, (1024,))
    host.run(ADD, a, b)
    host.run(ADD, a, b)  # planned from here on (two equal recordings)
    distinct, switches, entered = call_trace(lambda: host.run(ADD, a, b), __file__)
    print(f"{len(distinct)} files, {switches} switches, entries {dict(entered)}")
    if _op_plan.ENABLED:
        assert len(distinct) <= 11 and switches <= 10 and max(entered.values()) == 1
    else:
        assert len(distinct) <= 22 and switches <= 58


def test_release_ends_a_borrow_whoever_still_holds_the_ref(setup):
    """rs.release(ref) ends the borrow at once: an exclusive borrow of the same storage then
    succeeds while the released ref is still alive, and the released ref is refused — in a
    launch, for its pointer — while a ref that dies unreleased still gives its borrow back."""
    from tenferro_host.cuda import raw

    _, rt, _, _, module = setup
    a = rt.empty(tf.float32, (1024,))
    function = module.function("add_kernel")
    config = raw.LaunchConfig.flat(1024, 256)
    with rt.session() as s, s.exec_session().raw("tests.release") as rs:
        shared = rs.tensor(a)
        kept = [shared]  # e.g. a prepared launch or a traceback holding it
        with pytest.raises(tf.AliasingError):
            rs.tensor_mut(a)
        rs.release(shared)
        rs.release(shared)  # twice: nothing more to end
        out = rs.tensor_mut(a)  # the released ref no longer counts
        with pytest.raises(tf.SessionClosedError, match="released"):
            shared.data_ptr_unsafe()
        with pytest.raises(tf.SessionClosedError, match="released"):
            rs.launch(function, config, [out, shared, shared, raw.i32(1024)])
        del kept, shared  # dying released: must not end the exclusive borrow
        with pytest.raises(tf.AliasingError):
            rs.tensor(a)
        with pytest.raises(tf.ValidationError, match="release takes a ref"):
            rs.release(a)
        del out  # an unreleased ref's death ends its borrow
        assert rs.tensor(a).data_ptr_unsafe() == a.storage.ptr

"""The benchmark groups: each builds its cases (and their baselines) in one process.

A group function takes the host, an ``ExitStack`` (sessions held open for the group's whole
measurement are entered on it and closed after it) and the size settings, and returns a
:class:`~.timing.Group`. Whatever cannot run here — a backend that is unavailable, a baseline
library that is not installed or fails to set up — becomes a case with ``fn=None`` and the
reason, so it is listed as *not run*, never dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from .. import _op_handle
from .._host import Host
from . import baselines, c_floor
from .baselines import BLOCK, N
from .kernels import CUDA_ADD, DSL_OP, dsl_add, register_dsl_op
from .timing import Case, Group, try_case

EXT_ADD = "ext_add_kernel.add"


@dataclass(frozen=True)
class Sizes:
    """Rounds, batches and bandwidth sizes of a run (``quick`` is a smoke run)."""

    rounds: int = 20
    batch: int = 200
    log2_bandwidth: int = 28
    bandwidth_launches: int = 10
    bandwidth_rounds: int = 10
    #: launches per jit session in the WebGPU-vs-CUDA rows (WebGPU pays ~25 ms per session)
    cross_launches: int = 50
    compile_rounds: int = 5

    @classmethod
    def quick(cls) -> Sizes:
        """Small sizes for a quick run."""
        return cls(
            rounds=5,
            batch=50,
            log2_bandwidth=22,
            bandwidth_launches=3,
            bandwidth_rounds=3,
            cross_launches=3,
            compile_rounds=2,
        )


# Row names the targets refer to (report.TARGETS).
CORE_LAUNCH = "cuda.core launch(stream, cfg, kernel, ...)"
C_FLOOR = "C: cuLaunchKernel in a loop (the C floor)"
PREPARED = "PreparedLaunch.launch()"
RS_LAUNCH = "rs.launch(fn, cfg, args) (refs made once)"
CP_EMPTY = "CuPy cp.empty(1024, float32)"
ALLOC_OUTPUT = "rs.alloc_output(float32, (1024,))"
BORROW = "rs.tensor(t) borrow"
BORROW_MUT = "rs.tensor_mut(t) borrow"
BACKEND_SESSION = "with backend.session(): exec_session()"
RAW_SESSION = "with ex.raw(op): pass (enter + exit)"
RAW_BODY = "in a raw session: alloc_output + tensor_mut + 2x tensor + launch"
HOST_RUN_RAW = "host.run(ext_add_kernel.add) (cuda-raw variant)"
HANDLE_RAW = "op handle (cuda-raw variant)"
HOST_RUN_DSL = "host.run of a DSL op (dsl variant)"
#: the same calls on the pure-Python call (TENFERRO_COMPILED_CALL=0's), in the same run
PURE = " [pure-Python call]"
HOST_RUN_RAW_PY, HANDLE_RAW_PY = HOST_RUN_RAW + PURE, HANDLE_RAW + PURE
HOST_RUN_DSL_PY = HOST_RUN_DSL + PURE
DSL_SESSION_OP = "with ex.jit(op) + alloc_output + launch (open exec session)"
DSL_CACHED = "cached DSL launch in an open jit session"
CPU_NUMPY = "np.add(a, b, out=o)"
CPU_HOST_RUN = "host.run(ext_add_kernel.add) (cpu variant)"
CPU_HANDLE = "op handle (cpu variant)"
CPU_HOST_RUN_PY, CPU_HANDLE_PY = CPU_HOST_RUN + PURE, CPU_HANDLE + PURE
WGPU_DIRECT = "wgpu-py: encoder + pass + dispatch + submit of the plan's pipeline and buffers"
WGPU_OWN_DEVICE = "wgpu-py: hand-written WGSL add on a device of its own (prebuilt bind group)"
WGPU_HOST_RUN = "host.run(ext_add_kernel.add) (dsl variant)"
WGPU_HANDLE = "op handle (dsl variant)"
BW_CUPY = "CuPy RawKernel add"
BW_SEAM = "seam add (hand-written kernel, PreparedLaunch)"
BW_DSL = "DSL add (CUDA JIT js.launch)"
BW_COPY = "CuPy D2D copy (memcpyAsync)"
XB_WEBGPU = "DSL add on WebGPU (one jit session)"
XB_CUDA = "DSL add on CUDA JIT (one jit session)"
NVRTC_COLD = "NVRTC compile + load, cold (unique source)"
NVRTC_HIT = "NVRTC compile_source, same source again"
MODULE_HIT = "compiled module from the runtime's cache (rs.resource hit)"
CUPY_COLD = "CuPy RawModule compile, cold (unique source)"

PLAN_STEPS = ("replay", "enter/exit", "allocation", "slot writes", "launch")
PLAN_ROWS = tuple(f"op plan of the cuda-raw add: {step}" for step in PLAN_STEPS)
WGPU_PLAN_STEPS = ("replay", "allocation", "bind group", "encode + submit")
WGPU_PLAN_ROWS = tuple(f"op plan of the WebGPU add: {step}" for step in WGPU_PLAN_STEPS)
CPU_PLAN_STEPS = ("replay", "allocation")
CPU_PLAN_ROWS = tuple(f"op plan of the cpu add: {step}" for step in CPU_PLAN_STEPS)

#: Other libraries' CUDA call rows: timed beside the host's, not profiled.
CUDA_PEER_ROWS = (
    "CuPy RawKernel",
    "CuPy RawKernel with cp.empty output",
    "CuPy a + b",
    "torch.add(a, b)",
    "Triton add (preallocated output)",
    "cupyx.jit add",
    "numba-cuda add",
)
#: The CUDA op call group's rows, in report order.
CUDA_CALL_ROWS = (
    C_FLOOR,
    CORE_LAUNCH,
    PREPARED,
    RS_LAUNCH,
    *CUDA_PEER_ROWS,
    BACKEND_SESSION,
    RAW_SESSION,
    RAW_BODY,
    ALLOC_OUTPUT,
    CP_EMPTY,
    BORROW,
    BORROW_MUT,
    HOST_RUN_RAW,
    HANDLE_RAW,
    HOST_RUN_RAW_PY,
    HANDLE_RAW_PY,
    *PLAN_ROWS,
    HOST_RUN_DSL,
    HOST_RUN_DSL_PY,
    DSL_SESSION_OP,
    DSL_CACHED,
)
#: The host's own rows among them, profiled after the timing (the rest measure other code).
CUDA_PROFILED_ROWS = tuple(
    r for r in CUDA_CALL_ROWS if r not in (C_FLOOR, CORE_LAUNCH, CP_EMPTY, *CUDA_PEER_ROWS)
)


def _unavailable(host: Host, kind: str) -> str | None:
    status = host.backend_status(kind)
    return None if status.available else f"backend {kind} unavailable: {status.reason}"


def _not_run(key: str, title: str, rows: tuple[str, ...], why: str, unit: str = "us") -> Group:
    return Group(key, title, [Case(r, None, why) for r in rows], unit=unit)


def _op_call_group(
    key: str,
    title: str,
    cases: list[Case],
    sizes: Sizes,
    profiled: tuple[str, ...],
    sync: Callable[[], None] = lambda: None,
    notes: list[str] | None = None,
) -> Group:
    """An op call group: per-call µs in the sizes' rounds and batches, ``profiled`` rows counted
    after the timing."""
    return Group(
        key,
        title,
        cases,
        sync,
        rounds=sizes.rounds,
        batch=sizes.batch,
        notes=notes or [],
        profiled=profiled,
    )


def _has_op(host: Host, name: str) -> bool:
    return name in host.registry.ops and host.registry.ops[name].status == "ok"


def _plan_steps(
    host: Host,
    a: Any,
    b: Any,
    rows: tuple[str, ...] = PLAN_ROWS,
    names: tuple[str, ...] = PLAN_STEPS,
) -> tuple[list[Case], str]:
    """The ``rows`` of the add's planned call on ``a``'s runtime: ``steps()`` of the handle's
    replay there, by ``names``, and what the handle says of its plans — or the rows not run,
    saying why."""
    if not _has_op(host, EXT_ADD):
        return [Case(r, None, "ext-add-kernel not installed") for r in rows], ""
    handle = host.op(EXT_ADD)
    for _ in range(3):  # two equal recordings plan the call; the third replays
        host.run(EXT_ADD, a, b)
    state = "; ".join(f"{k}: {v}" for k, v in handle.plans().items())
    runtime = a.storage.runtime
    replay = next(
        (
            p
            for p in handle._plans.values()
            if hasattr(p, "steps") and getattr(p, "runtime", None) is runtime
        ),
        None,
    )
    if replay is None:
        return [Case(r, None, f"no op plan: {state or 'off'}") for r in rows], state
    steps = replay.steps((a, b))
    return [Case(row, steps[step]) for row, step in zip(rows, names, strict=True)], state


@contextmanager
def pure_python_call() -> Iterator[None]:
    """The op handles' pure-Python call meanwhile (what ``TENFERRO_COMPILED_CALL=0`` runs)."""
    compiled, _op_handle.CALL = _op_handle.CALL, None
    try:
        yield
    finally:
        _op_handle.CALL = compiled


def _ext_add_calls(host: Host, a: Any, b: Any, run_row: str, handle_row: str) -> list[Case]:
    """The example add through ``host.run`` and through its op handle, each on the compiled
    call and on the pure-Python one (rows named with :data:`PURE`), or all not run."""
    rows = (run_row, handle_row, run_row + PURE, handle_row + PURE)
    if not _has_op(host, EXT_ADD):
        return [Case(r, None, "ext-add-kernel not installed") for r in rows]
    handle = host.op(EXT_ADD)
    run, call = partial(host.run, EXT_ADD, a, b), partial(handle, a, b)
    return [
        Case(rows[0], run),
        Case(rows[1], call),
        Case(rows[2], run, within=pure_python_call),
        Case(rows[3], call, within=pure_python_call),
    ]


# -- CPU ------------------------------------------------------------------------------------------
def cpu_op_call(host: Host, stack: ExitStack, sizes: Sizes) -> Group:
    """``host.run`` of the example add on the CPU backend against numpy's own call."""
    key, title = "cpu", f"op call, CPU, {N}-element f32 add"
    cpu = host.backend("cpu")
    x = np.ones(N, np.float32)
    o = np.empty_like(x)
    a, b = cpu.upload(x), cpu.upload(x)
    cases = [Case(CPU_NUMPY, lambda: np.add(x, x, out=o))]
    cases += _ext_add_calls(host, a, b, CPU_HOST_RUN, CPU_HANDLE)
    cases += _plan_steps(host, a, b, CPU_PLAN_ROWS, CPU_PLAN_STEPS)[0]
    profiled = (CPU_HOST_RUN, CPU_HANDLE, CPU_HOST_RUN_PY, CPU_HANDLE_PY, *CPU_PLAN_ROWS)
    return _op_call_group(key, title, cases, sizes, profiled)


# -- WebGPU ---------------------------------------------------------------------------------------
def webgpu_op_call(host: Host, stack: ExitStack, sizes: Sizes) -> Group:
    """``host.run`` of the example add on WebGPU against the same dispatch through bare wgpu-py:
    the WGSL, uniform and storage buffers of the call's op plan, on the runtime's own device
    (and, as a second anchor, a hand-written WGSL add on a device of its own)."""
    key, title = "webgpu", f"op call, WebGPU, {N}-element f32 add"
    calls = (WGPU_HOST_RUN, WGPU_HANDLE, WGPU_HOST_RUN + PURE, WGPU_HANDLE + PURE)
    rows = (WGPU_DIRECT, WGPU_OWN_DEVICE, *calls, *WGPU_PLAN_ROWS)
    why = _unavailable(host, "webgpu")
    if why:
        return _not_run(key, title, rows, why)
    rt = host.backend("webgpu")
    ones = np.ones(N, np.float32)
    a, b = rt.upload(ones), rt.upload(ones)
    steps, plan_state = _plan_steps(
        host, a, b, (WGPU_DIRECT, *WGPU_PLAN_ROWS), ("bare wgpu-py dispatch", *WGPU_PLAN_STEPS)
    )
    direct, direct_sync = baselines.wgpu_add(rt.index)
    cases = [steps.pop(0), Case(WGPU_OWN_DEVICE, direct)]
    cases += _ext_add_calls(host, a, b, WGPU_HOST_RUN, WGPU_HANDLE)
    cases += steps

    def sync() -> None:
        rt.synchronize()
        direct_sync()

    notes = [f"adapter: {rt.device_info.name}"]
    if plan_state:
        notes.append(f"op plans of {EXT_ADD}: {plan_state}")
    return _op_call_group(key, title, cases, sizes, rows, sync, notes)


# -- CUDA op call ---------------------------------------------------------------------------------
def cuda_op_call(host: Host, stack: ExitStack, sizes: Sizes) -> Group:
    """The op call on CUDA, every figure beside cuda.core's bare launch of the same add."""
    key, title = "cuda", f"op call, CUDA, {N}-element f32 add"
    why = _unavailable(host, "cuda")
    if why:
        return _not_run(key, title, CUDA_CALL_ROWS, why)
    import tenferro_host as tf
    from tenferro_host.cuda import raw

    register_dsl_op(host)
    rt = host.backend("cuda")  # host.run, op handles, backend sessions: nothing held open
    inner = host.new_backend("cuda")  # its sessions stay open for the whole group
    ones = np.ones(N, np.float32)
    a, b = rt.upload(ones), rt.upload(ones)
    ia, ib, im = inner.upload(ones), inner.upload(ones), inner.upload(ones)
    s = stack.enter_context(inner.session())
    ex = s.exec_session()
    rs = stack.enter_context(ex.raw("tenferro_bench.raw"))
    function = rs.compile_nvrtc(CUDA_ADD).function("add_kernel")
    out = rs.alloc_output(tf.float32, (N,))
    args = [rs.tensor_mut(out), rs.tensor(ia), rs.tensor(ib), raw.i32(N)]
    config = raw.LaunchConfig.flat(N, BLOCK)
    prepared = rs.prepare(function, config, args)
    ptrs = [r.data_ptr_unsafe() for r in args[:3]]
    js = stack.enter_context(ex.jit("tenferro_bench.jit_open"))
    js_out = js.alloc_output(tf.float32, (N,))
    count, dim = js.cube_count_1d(N), js.cube_dim_1d()
    syncs: list[Callable[[], None]] = [rt.synchronize, inner.synchronize]

    def raw_body() -> None:
        o = rs.alloc_output(tf.float32, (N,))
        rs.launch(function, config, [rs.tensor_mut(o), rs.tensor(ia), rs.tensor(ib), raw.i32(N)])

    def raw_session() -> None:
        with ex.raw("tenferro_bench.empty"):
            pass

    def backend_session() -> None:
        with rt.session() as bs:
            tf.cuda.exec_session(bs)

    def dsl_session_op() -> None:
        with ex.jit(DSL_OP) as j:
            o = j.alloc_output(tf.float32, (N,))
            j.launch(dsl_add, count, dim, o, ia, ib)

    cases = [c_floor.case(C_FLOOR, syncs)]
    cases += [try_case(CORE_LAUNCH, lambda: baselines.core_launch(rt, ptrs, syncs))]
    cases += [
        Case(PREPARED, prepared.launch),
        Case(RS_LAUNCH, lambda: rs.launch(function, config, args)),
    ]
    cases += baselines.cupy_cases(syncs)
    cases += [
        try_case("torch.add(a, b)", lambda: baselines.torch_add(syncs)),
        try_case("Triton add (preallocated output)", lambda: baselines.triton_add(syncs)),
        try_case("cupyx.jit add", lambda: baselines.cupyx_jit_add(syncs)),
        try_case("numba-cuda add", lambda: baselines.numba_add(syncs)),
    ]
    cases += [
        Case(BACKEND_SESSION, backend_session),
        Case(RAW_SESSION, raw_session),
        Case(RAW_BODY, raw_body),
        Case(ALLOC_OUTPUT, lambda: rs.alloc_output(tf.float32, (N,))),
        try_case(CP_EMPTY, baselines.cupy_empty),
        Case(BORROW, lambda: rs.tensor(ia)),
        Case(BORROW_MUT, lambda: rs.tensor_mut(im)),
    ]
    cases += _ext_add_calls(host, a, b, HOST_RUN_RAW, HANDLE_RAW)
    steps, plan_state = _plan_steps(host, a, b)
    cases += steps
    cases += [
        Case(HOST_RUN_DSL, partial(host.run, DSL_OP, a, b)),
        Case(HOST_RUN_DSL_PY, partial(host.run, DSL_OP, a, b), within=pure_python_call),
        Case(DSL_SESSION_OP, dsl_session_op),
        Case(DSL_CACHED, lambda: js.launch(dsl_add, count, dim, js_out, ia, ib)),
    ]
    order = {name: i for i, name in enumerate(CUDA_CALL_ROWS)}
    cases.sort(key=lambda c: order[c.name])

    notes = [f"device: {rt.device_info.name}", f"op plans of {EXT_ADD}: {plan_state or 'none'}"]
    return _op_call_group(key, title, cases, sizes, CUDA_PROFILED_ROWS, _call_each(syncs), notes)


def _bandwidth_group(
    key: str,
    title: str,
    cases: list[Case],
    syncs: list[Callable[[], None]],
    sizes: Sizes,
    batch: int,
) -> Group:
    """A bandwidth group: GB/s, every library's wait in ``syncs`` inside the timing."""
    return Group(
        key,
        title,
        cases,
        _call_each(syncs),
        unit="GB/s",
        batch=batch,
        rounds=sizes.bandwidth_rounds,
        sync_in_timing=True,
    )


def _call_each(syncs: list[Callable[[], None]]) -> Callable[[], None]:
    """A group's sync: every library's wait in ``syncs``, including those appended later."""

    def sync() -> None:
        for fn in syncs:
            fn()

    return sync


# -- CUDA bandwidth -------------------------------------------------------------------------------
def cuda_bandwidth(host: Host, stack: ExitStack, sizes: Sizes) -> Group:
    """Device bandwidth of the add at 2^28 f32: seam vs CuPy, DSL vs hand-written, D2D copy."""
    n = 1 << sizes.log2_bandwidth
    key, title = "cuda-bandwidth", f"bandwidth, CUDA, 2^{sizes.log2_bandwidth} f32 (read + written)"
    rows = (BW_CUPY, BW_SEAM, BW_DSL, BW_COPY)
    why = _unavailable(host, "cuda")
    if why:
        return _not_run(key, title, rows, why, unit="GB/s")
    import tenferro_host as tf
    from tenferro_host.cuda import raw

    rt = host.new_backend("cuda")
    x, y = rt.zeros(tf.float32, (n,)), rt.zeros(tf.float32, (n,))
    s = stack.enter_context(rt.session())
    ex = s.exec_session()
    rs = stack.enter_context(ex.raw("tenferro_bench.bandwidth"))
    function = rs.compile_nvrtc(CUDA_ADD).function("add_kernel")
    out = rs.alloc_output(tf.float32, (n,))
    prepared = rs.prepare(
        function,
        raw.LaunchConfig.flat(n, BLOCK),
        [rs.tensor_mut(out), rs.tensor(x), rs.tensor(y), raw.i32(n)],
    )
    js = stack.enter_context(ex.jit("tenferro_bench.bandwidth_dsl"))
    dsl_out = js.alloc_output(tf.float32, (n,))
    count, dim = js.cube_count_1d(n), js.cube_dim_1d()
    add_bytes = 3 * 4 * n
    syncs: list[Callable[[], None]] = [rt.synchronize]

    def cupy_add() -> Callable[[], Any]:
        import cupy

        kernel = cupy.RawKernel(CUDA_ADD, "add_kernel")
        ca, cb, co = (cupy.zeros(n, cupy.float32) for _ in range(3))
        syncs.append(cupy.cuda.Device().synchronize)
        grid, block, n32 = (-(-n // BLOCK),), (BLOCK,), np.int32(n)
        return lambda: kernel(grid, block, (co, ca, cb, n32))

    def cupy_copy() -> Callable[[], Any]:
        import cupy

        src, dst = cupy.zeros(n, cupy.float32), cupy.empty(n, cupy.float32)
        return lambda: dst.data.copy_from_device_async(src.data, 4 * n)

    cases = [
        try_case(BW_CUPY, cupy_add, add_bytes),
        Case(BW_SEAM, prepared.launch, nbytes=add_bytes),
        Case(BW_DSL, lambda: js.launch(dsl_add, count, dim, dsl_out, x, y), nbytes=add_bytes),
        try_case(BW_COPY, cupy_copy, 2 * 4 * n),
    ]

    return _bandwidth_group(key, title, cases, syncs, sizes, sizes.bandwidth_launches)


# -- WebGPU vs CUDA JIT ---------------------------------------------------------------------------
def dsl_cross_backend(host: Host, stack: ExitStack, sizes: Sizes) -> Group:
    """One DSL kernel object on WebGPU and on CUDA JIT: the add's bandwidth, same sizes."""
    n = 1 << sizes.log2_bandwidth
    launches = sizes.cross_launches
    key = "dsl-backends"
    title = (
        f"the DSL add on WebGPU vs CUDA JIT, 2^{sizes.log2_bandwidth} f32, {launches} "
        "launches per jit session"
    )

    syncs: list[Callable[[], None]] = []
    cases = []
    for kind, name in (("webgpu", XB_WEBGPU), ("cuda", XB_CUDA)):
        why = _unavailable(host, kind)
        if why:
            cases.append(Case(name, None, why, nbytes=3 * 4 * n * launches))
            continue
        cases.append(
            try_case(
                name,
                partial(_dsl_sessions, host, stack, kind, n, launches, syncs),
                3 * 4 * n * launches,
            )
        )

    return _bandwidth_group(key, title, cases, syncs, sizes, 1)


def _dsl_sessions(
    host: Host, stack: ExitStack, kind: str, n: int, launches: int, syncs: list[Callable[[], None]]
) -> Callable[[], None]:
    """One jit session of ``launches`` DSL adds over ``n`` elements on a new ``kind`` runtime."""
    import tenferro_host as tf

    rt = host.new_backend(kind)
    x, y = rt.zeros(tf.float32, (n,)), rt.zeros(tf.float32, (n,))
    ex = stack.enter_context(rt.session()).exec_session()
    syncs.append(rt.synchronize)

    def session() -> None:
        with ex.jit("tenferro_bench.dsl_backends") as js:
            out = js.alloc_output(tf.float32, (n,))
            count, dim = js.cube_count_1d(n), js.cube_dim_1d()
            for _ in range(launches):
                js.launch(dsl_add, count, dim, out, x, y)

    return session


# -- compile --------------------------------------------------------------------------------------
_unique = itertools.count()


def compile_times(host: Host, stack: ExitStack, sizes: Sizes) -> Group:
    """NVRTC cold (a source never seen), a repeated source and the in-memory module cache's
    hit, beside CuPy's cold compile."""
    key, title = "compile", "compile, CUDA (the add kernel), ms per compile"
    rows = (NVRTC_COLD, NVRTC_HIT, MODULE_HIT, CUPY_COLD)
    why = _unavailable(host, "cuda")
    if why:
        return _not_run(key, title, rows, why, unit="ms")
    from ..compile_only import compile_source

    rt = host.new_backend("cuda")
    s = stack.enter_context(rt.session())
    rs = stack.enter_context(s.exec_session().raw("tenferro_bench.compile"))
    arch = rt.device_info.arch

    def fresh() -> str:
        return f"{CUDA_ADD}\n// tenferro bench {next(_unique)}\n"

    def cupy_cold() -> Callable[[], Any]:
        import cupy

        return lambda: cupy.RawModule(code=fresh()).get_function("add_kernel")

    cases = [
        Case(NVRTC_COLD, lambda: rs.compile_nvrtc(fresh())),
        Case(NVRTC_HIT, lambda: compile_source(CUDA_ADD, arch=arch, name="bench.cu", host=host)),
        Case(
            MODULE_HIT,
            lambda: rs.resource(("tenferro_bench", "add"), lambda: rs.compile_nvrtc(CUDA_ADD)),
        ),
        try_case(CUPY_COLD, cupy_cold),
    ]
    return Group(key, title, cases, rt.synchronize, unit="ms", batch=1, rounds=sizes.compile_rounds)


GROUPS: dict[str, Callable[[Host, ExitStack, Sizes], Group]] = {
    "cpu": cpu_op_call,
    "webgpu": webgpu_op_call,
    "cuda": cuda_op_call,
    "cuda-bandwidth": cuda_bandwidth,
    "dsl-backends": dsl_cross_backend,
    "compile": compile_times,
}

__all__ = ["GROUPS", "Sizes"]

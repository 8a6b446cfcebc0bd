"""The same 1024-element add outside the host, beside which the op-call figures are read:
cuda.core's bare ``launch``, CuPy, torch, Triton, cupyx.jit and numba-cuda (each setup returns
the timed call and appends its library's wait to ``syncs``), and wgpu-py on WebGPU (it returns
its call and its wait). One that is not installed raises ImportError, which the case reports as
not run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import webgpu
from .kernels import CUDA_ADD, WGSL_ADD
from .timing import Case, try_case

N = 1024
BLOCK = 256


def core_add(rt: Any) -> tuple[Any, Any, Any]:
    """(a stream of its own, the add kernel, its launch config) in cuda.core, on ``rt``'s device."""
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions

    device = Device(rt.index)
    device.set_current()
    kernel = (
        Program(CUDA_ADD, "c++", ProgramOptions(arch=rt.device_info.arch))
        .compile("cubin")
        .get_kernel("add_kernel")
    )
    return device.create_stream(), kernel, LaunchConfig(grid=N // BLOCK, block=BLOCK)


def core_launch(rt: Any, ptrs: list[int], syncs: list[Callable[[], None]]) -> Callable[[], Any]:
    """cuda.core's ``launch`` of the add on a stream of its own (the 1.00 of every ratio)."""
    from cuda.core import launch

    stream, kernel, config = core_add(rt)
    n32 = np.int32(N)
    syncs.append(stream.sync)
    return lambda: launch(stream, config, kernel, *ptrs, n32)


def cupy_cases(syncs: list[Callable[[], None]]) -> list[Case]:
    """CuPy's RawKernel (into a kept and a fresh output) and ``a + b``."""
    names = ("CuPy RawKernel", "CuPy RawKernel with cp.empty output", "CuPy a + b")
    try:
        import cupy
    except ImportError as exc:
        return [Case(n, None, f"not installed: {exc}") for n in names]
    kernel = cupy.RawKernel(CUDA_ADD, "add_kernel")
    ca, cb = cupy.ones(N, cupy.float32), cupy.ones(N, cupy.float32)
    cout = cupy.empty(N, cupy.float32)
    grid, block, n32 = (N // BLOCK,), (BLOCK,), np.int32(N)
    syncs.append(cupy.cuda.Device().synchronize)

    def with_empty() -> None:
        o = cupy.empty(N, cupy.float32)
        kernel(grid, block, (o, ca, cb, n32))

    return [
        try_case(names[0], lambda: lambda: kernel(grid, block, (cout, ca, cb, n32))),
        try_case(names[1], lambda: with_empty),
        try_case(names[2], lambda: lambda: ca + cb),
    ]


def cupy_empty() -> Callable[[], Any]:
    """CuPy's allocation of the output alone."""
    import cupy

    return lambda: cupy.empty(N, cupy.float32)


def torch_add(syncs: list[Callable[[], None]]) -> Callable[[], Any]:
    """``torch.add`` of two device tensors."""
    import torch

    ta, tb = torch.ones(N, device="cuda"), torch.ones(N, device="cuda")
    syncs.append(torch.cuda.synchronize)
    return lambda: torch.add(ta, tb)


def triton_add(syncs: list[Callable[[], None]]) -> Callable[[], Any]:
    """The Triton add into a preallocated output (compiled outside the timing)."""
    import torch

    from .triton_add import add

    if add is None:
        raise ImportError("No module named 'triton'")
    ta, tb = torch.ones(N, device="cuda"), torch.ones(N, device="cuda")
    to = torch.empty(N, device="cuda")
    add(ta, tb, to)  # compile outside the timing
    syncs.append(torch.cuda.synchronize)
    return lambda: add(ta, tb, to)


def cupyx_jit_add(syncs: list[Callable[[], None]]) -> Callable[[], Any]:
    """cupyx.jit's raw kernel add (compiled outside the timing)."""
    import cupy
    from cupyx import jit

    @jit.rawkernel()
    def add(out: Any, lhs: Any, rhs: Any, n: Any) -> None:
        i = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        if i < n:
            out[i] = lhs[i] + rhs[i]

    ca, cb = cupy.ones(N, cupy.float32), cupy.ones(N, cupy.float32)
    cout = cupy.empty(N, cupy.float32)
    grid, block, n32 = (N // BLOCK,), (BLOCK,), np.int32(N)
    add(grid, block, (cout, ca, cb, n32))  # compile outside the timing
    syncs.append(cupy.cuda.Device().synchronize)
    return lambda: add(grid, block, (cout, ca, cb, n32))


def numba_add(syncs: list[Callable[[], None]]) -> Callable[[], Any]:
    """numba-cuda's add (compiled outside the timing)."""
    from .numba_add import numba_launch

    launch, sync = numba_launch(N, BLOCK)
    syncs.append(sync)
    return launch


def wgpu_add(index: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(one dispatch of ``WGSL_ADD`` through wgpu-py on WebGPU adapter ``index``, on a device of
    its own; its wait), after one checked dispatch."""
    import wgpu

    _, wgpu_adapter = webgpu.adapter(index)
    device = wgpu_adapter.request_device_sync()
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    ones = np.ones(N, np.float32)
    out = device.create_buffer(size=4 * N, usage=usage)
    lhs = device.create_buffer_with_data(data=ones, usage=usage)
    rhs = device.create_buffer_with_data(data=ones, usage=usage)
    shader = device.create_shader_module(code=WGSL_ADD)
    pipeline = device.create_compute_pipeline(
        layout="auto", compute={"module": shader, "entry_point": "main"}
    )
    group = device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate((out, lhs, rhs))
        ],
    )

    def dispatch() -> None:
        encoder = device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(N // BLOCK, 1, 1)
        cpass.end()
        device.queue.submit([encoder.finish()])

    def sync() -> None:
        device.queue.read_buffer(out, 0, 4)  # waits for the queue's earlier submissions

    dispatch()
    got = np.frombuffer(device.queue.read_buffer(out), np.float32)
    if not (got == 2).all():
        raise RuntimeError("the direct wgpu-py add computed a wrong result")
    return dispatch, sync

"""Shared helpers of the CUDA tests: one Host per process, skip reasons, kernel sources.

Not a conftest (``tests/conftest.py`` is imported as ``conftest`` by other test packages);
GPU test modules define their fixtures from :func:`cuda_runtime`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

import tenferro_host as tf

ADD_SRC = r"""
extern "C" __global__ void add_kernel(float* out, const float* lhs, const float* rhs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lhs[i] + rhs[i];
}
extern "C" __global__ void empty_kernel() {}
"""

# out (compact, n0 x n1) = a 2-D view given by storage pointer, offset and strides (elements).
STRIDED_SRC = r"""
extern "C" __global__ void copy2d(float* out, const float* base, long long offset,
                                  int n0, int n1, long long s0, long long s1) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n0 * n1) {
        int r = i % n0, c = i / n0;
        out[i] = base[offset + r * s0 + c * s1];
    }
}
"""

# Spins for `ns` nanoseconds of the GPU's global timer, then writes 1.
SPIN_SRC = r"""
extern "C" __global__ void spin(int* flag, unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
    flag[0] = 1;
}
"""

SMEM_SRC = r"""
extern "C" __global__ void dyn_smem(float* out, int n) {
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = buf[n - 1];
}
extern "C" __global__ void __launch_bounds__(128) bounded(float* out) { out[0] = 1.0f; }
extern "C" __global__ void static_smem(float* out) {
    __shared__ float big[8192];
    big[threadIdx.x] = 1.0f;
    __syncthreads();
    out[0] = big[0];
}
"""


@cache
def shared_host() -> tf.Host:
    return tf.Host()


def cuda_runtime() -> Any:
    """The process's ``cuda:0`` runtime, or skip with the reason CUDA is unavailable."""
    status = shared_host().backend_status("cuda")
    if not status.available:
        pytest.skip(f"no CUDA device: {status.reason}")
    return shared_host().backend("cuda")


def driver() -> Any:
    from cuda.bindings import driver as d

    return d


def current_context() -> int:
    d = driver()
    err, ctx = d.cuCtxGetCurrent()
    assert int(err) == 0
    return int(ctx)


@contextlib.contextmanager
def raw_session(rt: Any, op: str = "tests.op") -> Iterator[tuple[Any, Any]]:
    """(exec session, raw session) of a fresh backend session of ``rt``."""
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        with ex.raw(op) as rs:
            yield ex, rs

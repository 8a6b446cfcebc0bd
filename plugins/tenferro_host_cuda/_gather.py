"""The host's own kernel: canonicalize's gather, a strided view copied into a compact tensor.

Compiled with NVRTC and loaded on a runtime's first canonicalize, one function per element size;
launched by the rules of every launch (:mod:`._launch`: the function's checks, a sticky fault
poisons the context, debug mode waits and names the kernel).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tenferro_host import Tensor, UnsupportedError

from . import _launch
from ._args import LaunchConfig
from ._driver import POISONED
from ._images import check_binary
from ._module import Function, Module, load_image
from ._nvrtc import NvrtcOptions, compile_source
from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._runtime import CudaRuntime

#: The most dimensions the gather reads (its shape and stride parameters).
MAX_DIMS = 8

_SOURCE = r"""
struct alignas(16) B16 { unsigned long long lo, hi; };
template <typename T>
__device__ void gather(T* dst, const T* src, long long n, int ndim, const long long* shape,
                       const long long* stride) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        long long rem = i, off = 0;
        for (int k = 0; k < ndim; ++k) {
            off += (rem % shape[k]) * stride[k];
            rem /= shape[k];
        }
        dst[i] = src[off];
    }
}
#define DIMS8(p) long long p##0, long long p##1, long long p##2, long long p##3, \
    long long p##4, long long p##5, long long p##6, long long p##7
#define GATHER(N, T) extern "C" __global__ void gather_##N( \
    T* dst, const T* src, long long n, int ndim, DIMS8(s), DIMS8(t)) { \
    const long long shape[8] = {s0, s1, s2, s3, s4, s5, s6, s7}; \
    const long long stride[8] = {t0, t1, t2, t3, t4, t5, t6, t7}; \
    gather<T>(dst, src, n, ndim, shape, stride); }
GATHER(1, unsigned char)
GATHER(2, unsigned short)
GATHER(4, unsigned int)
GATHER(8, unsigned long long)
GATHER(16, B16)
"""
#: The gather kernels' parameters: dst, src (pointers), n, ndim, 8 shape and 8 stride entries.
GATHER_CODES = ("Q", "Q", "q", "i", *("q",) * (2 * MAX_DIMS))


class Gather:
    """A runtime's gather kernels: the module, loaded on first use, and its functions by element
    size (dropped at close, so the module is unloaded with the runtime's other modules)."""

    def __init__(self, runtime: CudaRuntime) -> None:
        self.runtime = runtime
        self.module: Module | None = None
        self.functions: dict[int, Function] = {}

    def copy(self, src: Tensor, dst: Tensor) -> None:
        """Copy the view ``src`` into the compact ``dst`` (same shape and dtype), on the stream."""
        assert isinstance(src.storage, CudaStorage) and isinstance(dst.storage, CudaStorage)
        if src.ndim > MAX_DIMS:
            raise UnsupportedError(
                f"canonicalize handles up to {MAX_DIMS} dimensions, got {src.ndim}",
                backend=self.runtime.name,
                feature="canonicalize",
            )
        isz = src.dtype.itemsize
        n = src.numel
        pad = MAX_DIMS - src.ndim
        values = (
            dst.storage.ptr,
            src.storage.ptr + src.offset * isz,
            np.int64(n),
            np.int32(src.ndim),
            *map(np.int64, (*src.shape, *(1,) * pad)),
            *map(np.int64, (*src.strides, *(0,) * pad)),
        )
        config = LaunchConfig(min(math.ceil(n / 256), 65535), 256)
        launch(self.runtime, self.function(isz), config, values)

    def function(self, itemsize: int) -> Function:
        """The gather of ``itemsize``-byte elements (compiling and loading the module once)."""
        fn = self.functions.get(itemsize)
        if fn is None:
            if self.module is None:
                rt = self.runtime
                image = compile_source(
                    _SOURCE,
                    NvrtcOptions(std="c++17"),
                    device_arch=rt.device_info.arch,
                    name="tenferro_copy.cu",
                )
                check_binary(image.data)
                self.module = load_image(rt, image.data, "cubin", "canonicalize")
            fn = self.functions[itemsize] = self.module.function(f"gather_{itemsize}")
        return fn

    def clear(self) -> None:
        self.functions.clear()
        self.module = None


def launch(
    rt: CudaRuntime,
    fn: Function,
    config: LaunchConfig,
    values: tuple[Any, ...],
    op: str = "canonicalize",
) -> None:
    """Launch a host-internal kernel by the rules of every launch: the function's checks,
    cuda.core's ``launch``, a sticky fault poisons the context, and debug mode waits and names
    the kernel."""
    if rt.closed or POISONED:  # a poisoned context launches nothing more
        rt.check_usable()
    fn.check_config(config, op)
    fn.check_arguments(GATHER_CODES, op)
    with rt.primary:
        try:
            (_launch.launch_fn or _launch.core_launch())(
                rt.core_stream, fn.core_config(config), fn.core_kernel, *values
            )
        except Exception as exc:
            raise _launch.launch_failed(rt, op, exc, fn, config) from exc
        if rt.debug_sync:
            _launch.debug_wait(rt, op, rt.stream_handle, fn, config)


__all__ = ["GATHER_CODES", "MAX_DIMS", "Gather", "launch"]

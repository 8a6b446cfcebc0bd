"""A captured graph's nodes as the recording stand-in driver keeps them
(:mod:`support.driver_stand_in`): each kernel node's parameter block, and the parameters'
struct as the driver lays it out."""

from __future__ import annotations

import ctypes

_WORD = ctypes.c_uint64
_VOID_P, _UINT = ctypes.c_void_p, ctypes.c_uint

#: a kernel node's launch shape, as CUDA_KERNEL_NODE_PARAMS names it
SHAPE = (
    "gridDimX",
    "gridDimY",
    "gridDimZ",
    "blockDimX",
    "blockDimY",
    "blockDimZ",
    "sharedMemBytes",
)


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS (v2) as the driver lays it out: what a kernel node's parameters
    are read as, and what cuGraphExecKernelNodeSetParams's C entry point is given."""

    _fields_ = [
        ("func", _VOID_P),
        *((name, _UINT) for name in SHAPE),
        ("kernelParams", _VOID_P),
        ("extra", _VOID_P),
        ("kern", _VOID_P),
        ("ctx", _VOID_P),
    ]

    def getPtr(self) -> int:
        return ctypes.addressof(self)


class StandInNode:
    """A node of a captured graph; a kernel node owns its parameter block, as the driver's
    does (``kernelParams``: an array of pointers to one 8-byte word per parameter)."""

    def __init__(
        self, handle: int, kind: int, func: int, words: list[int], shape: tuple[int, ...]
    ) -> None:
        self.handle, self.kind, self.func, self.words = handle, kind, func, words
        self.shape = shape  # grid, block (x, y, z each) and shared memory bytes
        self._words = (_WORD * max(len(words), 1))(*words)
        base = ctypes.addressof(self._words)
        self._pointers = (ctypes.c_void_p * max(len(words), 1))(
            *(base + 8 * i for i in range(len(words)))
        )
        self.address = ctypes.addressof(self._pointers) if words else 0

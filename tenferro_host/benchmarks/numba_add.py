"""The add as a numba-cuda kernel, made on first use (numba is imported only then)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import numpy as np


def numba_cuda() -> Any:
    """``numba.cuda``, or why it does not import here (an ImportError when it is missing)."""
    try:
        from numba import cuda
    except AttributeError as exc:  # a numba-cuda written for an older numpy
        raise RuntimeError(
            f"numba-cuda {metadata.version('numba-cuda')} does not import with numpy "
            f"{np.__version__} ({exc}): numba-cuda up to 0.30.4 (the newest release, 2026-12) "
            "registers np.row_stack, which numpy 2.5 removed; no release works with numpy 2.5"
        ) from exc
    return cuda


def make_add() -> Any:
    """The compiled-on-launch ``add(out, lhs, rhs)`` kernel (``add[blocks, threads](...)``)."""
    cuda = numba_cuda()

    @cuda.jit
    def add(out: Any, lhs: Any, rhs: Any) -> None:
        i = cuda.grid(1)
        if i < out.size:
            out[i] = lhs[i] + rhs[i]

    return add

"""The add as a numba-cuda kernel, made on first use (numba is imported only then)."""

from __future__ import annotations

from typing import Any


def make_add() -> Any:
    """The compiled-on-launch ``add(out, lhs, rhs)`` kernel (``add[blocks, threads](...)``)."""
    from numba import cuda

    @cuda.jit
    def add(out: Any, lhs: Any, rhs: Any) -> None:
        i = cuda.grid(1)
        if i < out.size:
            out[i] = lhs[i] + rhs[i]

    return add

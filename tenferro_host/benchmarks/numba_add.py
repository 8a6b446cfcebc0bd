"""The add as a numba-cuda kernel, made on first use (numba is imported only then)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np


def numba_launch(n: int, block: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(a launch of numba-cuda's add of two ``n``-element inputs, compiled by a first launch
    here; numba's synchronize). A numba-cuda that does not work with this numpy says so: every
    release up to 0.30.4 (the newest, 2026-12) registers ``np.row_stack`` when it first
    compiles, and numpy 2.5 removed it."""
    try:
        from numba import cuda

        @cuda.jit
        def add(out: Any, lhs: Any, rhs: Any) -> None:
            i = cuda.grid(1)
            if i < out.size:
                out[i] = lhs[i] + rhs[i]

        ones = np.ones(n, np.float32)
        da, db, do = cuda.to_device(ones), cuda.to_device(ones), cuda.device_array(n, np.float32)
        launch = add[n // block, block]
        launch(do, da, db)  # the compile, outside the timing
    except AttributeError as exc:  # a numba-cuda written for an older numpy
        raise RuntimeError(
            f"numba-cuda {metadata.version('numba-cuda')} fails with numpy {np.__version__}: {exc}"
        ) from exc
    return (lambda: launch(do, da, db)), cuda.synchronize

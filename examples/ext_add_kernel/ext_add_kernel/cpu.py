"""The ``cpu`` variant: numpy computes straight into a fresh tensor of the session's runtime.

Inputs may be non-compact views; the exec session's ``launch`` hands numpy views of them
without a copy, and the output comes from ``alloc_output``. Through that seam an op call can be
recorded and replayed (an op plan): a variant that calls numpy on ``CpuRuntime.strided_view``
views works too, on the full path every time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenferro_host import Tensor

from . import check_operands


def add(ex: Any, lhs: Tensor, rhs: Tensor) -> Tensor:
    """``out = lhs + rhs`` on the CPU exec session ``ex``."""
    check_operands(lhs, rhs)
    out = ex.alloc_output(lhs.dtype, lhs.shape)
    if out.numel:
        ex.launch(np.add, lhs, rhs, out=out)
    return out


__all__ = ["add"]

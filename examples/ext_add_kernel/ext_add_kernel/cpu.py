"""The ``cpu`` variant: numpy computes straight into a fresh tensor of the session's runtime.

Inputs may be non-compact views; ``CpuRuntime.strided_view`` exposes them to numpy without a
copy, and the output is a compact tensor allocated by the runtime itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenferro_host import Tensor
from tenferro_host.cpu import CpuRuntime

from . import check_operands


def add(ex: Any, lhs: Tensor, rhs: Tensor) -> Tensor:
    """``out = lhs + rhs`` on the CPU exec session ``ex``."""
    check_operands(lhs, rhs)
    out = ex.runtime.empty(lhs.dtype, lhs.shape)
    if out.numel:
        np.add(
            CpuRuntime.strided_view(lhs),
            CpuRuntime.strided_view(rhs),
            out=CpuRuntime.strided_view(out),
        )
    return out


__all__ = ["add"]

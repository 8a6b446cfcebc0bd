"""The CPU backend's JIT session: launches run on the vectorised interpreter at once.

Running each launch immediately (instead of batching until exit) is indistinguishable for
callers: the CPU runtime executes synchronously, so results are visible in submission order,
which is all the batching contract promises.
"""

from __future__ import annotations

import numpy as np

from .. import UnsupportedError
from ..kernel.ir import U32_MAX
from ..provider import RECORDING, Grid, JitLaunch, JitSession
from ._interpreter import ArrayArg, run
from ._replay import DslForm


class CpuJitSession(JitSession):
    """``ex.jit(op)`` on a CPU exec session."""

    target = "cpu"
    default_cube_dim = 256

    @property
    def max_grid(self) -> Grid:
        return (U32_MAX, U32_MAX, U32_MAX)

    @property
    def max_cube_threads(self) -> int:
        """The CUDA limit, so that a launch that runs here also fits a GPU."""
        return 1024

    def _dispatch(self, launch: JitLaunch) -> DslForm | None:
        args: list[ArrayArg | np.generic] = []
        for param, value in zip(launch.spec.params, launch.args, strict=True):
            if isinstance(value, np.generic):
                args.append(value)
                continue
            storage = getattr(value.storage, "array", None)
            if storage is None:  # an empty tensor owns no memory
                storage = np.empty(0, param.dtype.numpy)
            elif storage.dtype != param.dtype.numpy:
                raise UnsupportedError(
                    f"argument {param.name!r}: its CPU storage holds {storage.dtype}, not "
                    f"{param.dtype.name}; canonicalize the tensor first",
                    backend=self.runtime.name,
                    feature="reinterpreted storage",
                )
            args.append(ArrayArg(storage, value.offset, value.shape, value.strides))
        run(launch.spec, launch.count, launch.dim, args)
        return DslForm.of(launch) if RECORDING.rec is not None else None  # none asked for it


__all__ = ["CpuJitSession"]

"""Entry point of ext_add_kernel: declares ``ext_add_kernel.add`` to the host.

The host imports this module (entry point ``ext_add_kernel`` in the group ``tenferro_host``),
checks ``TENFERRO_HOST_API`` and calls :func:`tenferro_host_register` once.

>>> ADD.name, ADD.signature.inputs, sorted(ADD.variants)[0]
('ext_add_kernel.add', ('lhs', 'rhs'), 'cpu')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_host
from tenferro_host import KernelSource, OpSpec, Signature

from . import DTYPES, OP_NAME, cpu, cuda_raw, dsl

TENFERRO_HOST_API = (1, 0)


def reference(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """What every variant must compute."""
    return np.add(lhs, rhs)


def backward(ops: Any, inputs: Any, outputs: Any, grads: Any) -> tuple[Any, Any]:
    """The gradient of each operand is the output's (the operands have one shape: no
    broadcast to undo), for the torch and JAX bridges."""
    (grad,) = grads
    return grad, grad


#: Variant kind -> callable(exec_session, lhs, rhs).
VARIANTS: dict[str, Callable[..., Any]] = {
    "cpu": cpu.add,
    "cuda-raw": cuda_raw.add,
    "dsl": dsl.add,
}

ADD = OpSpec(
    name=OP_NAME,
    signature=Signature(
        inputs=("lhs", "rhs"),
        outputs=("out",),
        dtypes=DTYPES,
        # Both operands have one shape of any rank; `run` defaults to a million elements.
        shapes={"lhs": ("*dims",), "rhs": ("*dims",)},
        samples=({"dims": (1_000_000,)},),
    ),
    reference=reference,
    variants=VARIANTS,
    kernels=(
        KernelSource(
            "add_kernel",
            "cuda",
            cuda_raw.kernel_source,
            archs=("sm_80", "sm_90", "compute_90"),
            build_info=cuda_raw.build_info(),
        ),
    ),
    doc="Elementwise sum of two tensors of one shape and dtype.",
    backward=backward,
)


@tenferro_host.hookimpl
def tenferro_host_register(registry: Any) -> None:
    """Declare the ``ext_add_kernel.add`` op."""
    registry.add_op(ADD)


__all__ = [
    "ADD",
    "TENFERRO_HOST_API",
    "VARIANTS",
    "backward",
    "reference",
    "tenferro_host_register",
]

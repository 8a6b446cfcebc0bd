# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""The ``dsl`` variant: one kernel in the tenferro-host DSL for every backend with JIT_KERNEL.

The same kernel object runs on CUDA (compiled to CUDA C), WebGPU (compiled to WGSL) and the CPU
(interpreted), launched through the exec session's ``jit(op)`` session. Non-compact inputs are
canonicalized first (the kernel indexes its operands linearly); the output is a fresh compact
tensor of the session's runtime.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> a = cpu.upload(np.array([1.0, 2.0], dtype=np.float32))
>>> with cpu.session() as s:
...     add(tf.cpu.exec_session(s), a, a).download().tolist()
[2.0, 4.0]
"""

from __future__ import annotations

from typing import Any

from tenferro_host import Tensor
from tenferro_host import kernel as K

from . import OP_NAME, check_operands


@K.kernel
def add_kernel(out: K.Array[K.F], lhs: K.Array[K.F], rhs: K.Array[K.F]):
    """``out = lhs + rhs``, one thread per element (float dtypes)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = lhs[i] + rhs[i]


@K.kernel
def add_int_kernel(out: K.Array[K.I], lhs: K.Array[K.I], rhs: K.Array[K.I]):
    """The same for integer dtypes (``K.F`` binds float dtypes only, ``K.I`` integer ones)."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = lhs[i] + rhs[i]


def add(ex: Any, lhs: Tensor, rhs: Tensor) -> Tensor:
    """``out = lhs + rhs`` in a JIT session of the exec session ``ex`` (any JIT backend)."""
    check_operands(lhs, rhs)
    runtime = ex.runtime
    if not lhs.is_compact():
        lhs = runtime.canonicalize(lhs)
    if not rhs.is_compact():
        rhs = runtime.canonicalize(rhs)
    kernel = add_kernel if lhs.dtype.is_float else add_int_kernel
    with ex.jit(OP_NAME) as js:
        out = js.alloc_output(lhs.dtype, lhs.shape)
        js.launch(kernel, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, lhs, rhs)
    return out


__all__ = ["add", "add_int_kernel", "add_kernel"]

"""The add as a Triton kernel; ``add`` is None where Triton is not installed.

Triton reads a kernel's source from its module, so the kernel is defined at module level,
guarded so that importing this module (doctest collection, machines without Triton) never fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BLOCK = 1024
add: Callable[[Any, Any, Any], None] | None = None

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

if triton is not None:

    @triton.jit
    def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: N803 - triton's constexpr style
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    def _add(x: Any, y: Any, out: Any) -> None:
        """``out = x + y`` for 1-D torch tensors on the GPU."""
        n = out.numel()
        _add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)

    add = _add

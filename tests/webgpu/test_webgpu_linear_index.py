"""A linear index on a strided 1-D view follows its stride on WebGPU, as in the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
from support.view_kernels import accumulate_strided, double
from support.webgpu_harness import View, assert_same, on_target, webgpu_jit


def test_loads_stores_and_atomics_follow_the_stride(rt: Any) -> None:
    storage = np.arange(12, dtype=np.float32)
    out = View(np.zeros(8, np.float32), 0, (8,), (1,))
    x = View(storage, 1, (4,), (3,))
    assert_same(rt, accumulate_strided, 1, 4, out, x)
    (got, _) = on_target(rt, lambda: webgpu_jit(rt), accumulate_strided, 1, 4, out, x)
    np.testing.assert_array_equal(got[2:6], storage[1::3])


def test_a_strided_written_view_aliasing_its_input(rt: Any) -> None:
    storage = np.arange(20, dtype=np.float32)
    odd, even = View(storage, 1, (10,), (2,)), View(storage, 0, (10,), (2,))
    assert_same(rt, double, 1, 32, odd, even)

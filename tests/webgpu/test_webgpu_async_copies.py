"""Asynchronous copies on WebGPU (copied at once, the same results) against the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import copy_kernels as ck
from support.webgpu_harness import View, assert_same

RNG = np.random.default_rng(40)


@pytest.mark.parametrize("blocks", [1, 3])
def test_a_double_buffered_sum(rt: Any, blocks: int) -> None:
    x = RNG.standard_normal(ck.CUBE * 4 * blocks).astype(np.float32)
    out = View.compact(np.zeros(ck.CUBE, np.float32))
    assert_same(rt, ck.staged_sums, 1, ck.CUBE, out, View.compact(x), np.uint32(blocks))

"""``K.load4``/``K.store4`` on WebGPU (four scalar accesses), against the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import vector_kernels as vk
from support.webgpu_harness import View, assert_same

RNG = np.random.default_rng(6)


@pytest.mark.parametrize("offset", [0, 3])
def test_scale4(rt: Any, offset: int) -> None:
    storage = RNG.standard_normal(72).astype(np.float32)
    out = View.compact(np.zeros(64, np.float32))
    assert_same(rt, vk.scale4, 1, 16, out, View(storage, offset, (64,), (1,)), np.float32(-2))


def test_sum4_through_a_stride_and_shared_vectors(rt: Any) -> None:
    storage = RNG.standard_normal(256).astype(np.float32)
    out = View.compact(np.zeros(16, np.float32))
    assert_same(rt, vk.sum4, 1, 16, out, View(storage, 1, (64,), (3,)))
    x = View.compact(np.arange(256, dtype=np.int32))
    assert_same(rt, vk.reverse4_through_shared, 2, 32, View.compact(np.zeros(256, np.int32)), x)

"""Asynchronous copies through the CUDA JIT session: on the fake raw seam (CPU) and, marked
``gpu``/``cuda``, on a CUDA device (``cp.async``), against the interpreter; on the device also
from a view whose offset leaves the 16-byte copies misaligned (they copy element by element)."""

from __future__ import annotations

import numpy as np
import pytest
from support import copy_kernels as ck
from support.cuda_jit_harness import Target, View, assert_same

RNG = np.random.default_rng(41)


@pytest.mark.parametrize("blocks", [1, 4])
def test_a_double_buffered_sum(target: Target, blocks: int) -> None:
    x = RNG.standard_normal(ck.CUBE * 4 * blocks).astype(np.float32)
    out = View.compact(np.zeros(ck.CUBE, np.float32))
    assert_same(target, ck.staged_sums, 1, ck.CUBE, out, View.compact(x), np.uint32(blocks),
                rtol=1e-6)  # fmt: skip


def test_misaligned_copies_copy_element_by_element(target: Target) -> None:
    n = ck.CUBE * 4 * 2
    storage = RNG.standard_normal(n + 1).astype(np.float32)
    x = View(storage, 1, (n,), (1,))  # one element in: no 16-byte copy is aligned
    out = View.compact(np.zeros(ck.CUBE, np.float32))
    assert_same(target, ck.staged_sums, 1, ck.CUBE, out, x, np.uint32(2), rtol=1e-6)

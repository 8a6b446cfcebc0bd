"""Shared arrays sized at launch and multi-dimensional shared arrays through the CUDA JIT session
(on the fake raw seam, which checks the launch's dynamic shared memory, and on a GPU)."""

from __future__ import annotations

import numpy as np
from support import shared_kernels as sk
from support.cuda_jit_harness import Target

RNG = np.random.default_rng(7)


def test_each_launch_gets_the_dynamic_shared_memory_its_sizes_need(target: Target) -> None:
    x = RNG.standard_normal(1024).astype(np.float32)
    t = target.rt.upload(x)
    results = {}
    with target.jit() as js:
        for n in (32, 128, 32, 256):  # a plan per size: its launch config carries the bytes
            out = js.alloc_output("float32", (1024 // n,))
            js.launch(sk.dynamic_block_sum, 1024 // n, n, out, t, np.uint32(n))
            results[n] = out.download()
    for n, got in results.items():
        np.testing.assert_allclose(got, x.reshape(-1, n).sum(axis=1), rtol=1e-4, atol=1e-5)


def test_two_dynamic_arrays_at_aligned_offsets(target: Target) -> None:
    got = {}
    with target.jit() as js:
        out = js.alloc_output("float32", (16,))
        for m in (3, 7, 3):  # one launch shape, three sizes: the sizes select the plan too
            js.launch(sk.two_dynamic, 2, 8, out, 8, m)
            got[m] = out.download()
    u = np.arange(16) % 8
    for m, values in got.items():
        np.testing.assert_array_equal(values, ((u + 1) % 8) * 2.0 + (u % m) * 3 + (u % 4) * 100)


def test_a_two_dimensional_tile_transposes(target: Target) -> None:
    m = RNG.standard_normal((37, 21)).astype(np.float32)
    with target.jit() as js:
        out = js.alloc_output("float32", (21, 37))
        js.launch(sk.tile_transpose, (5, 3), (sk.TILE, sk.TILE), out, target.rt.upload(m))
        got = out.download()
    np.testing.assert_array_equal(got, m.T)

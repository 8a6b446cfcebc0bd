"""Shared arrays sized at launch and multi-dimensional shared arrays on WebGPU, against the
interpreter and numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import shared_kernels as sk
from support.webgpu_harness import View, assert_same, on_target, webgpu_jit

from tenferro_host.errors import UnsupportedError

RNG = np.random.default_rng(11)


def run(rt: Any, kernel: Any, count: Any, dim: Any, *args: Any) -> list[Any]:
    return on_target(rt, lambda: webgpu_jit(rt), kernel, count, dim, *args)


@pytest.mark.parametrize("n", [32, 64])
def test_a_dynamic_block_sum(rt: Any, n: int) -> None:
    x = RNG.standard_normal(4 * n).astype(np.float32)
    out = View.compact(np.zeros(4, np.float32))
    (got, _) = run(rt, sk.dynamic_block_sum, 4, n, out, View.compact(x), np.uint32(n))
    np.testing.assert_allclose(got, x.reshape(4, n).sum(axis=1), rtol=1e-5, atol=1e-5)
    assert_same(rt, sk.dynamic_block_sum, 4, n, out, View.compact(x), np.uint32(n), rtol=1e-6)


def test_two_dynamic_arrays_and_sizes_in_one_session(rt: Any) -> None:
    got = {}
    with webgpu_jit(rt) as js:
        out = js.alloc_output("float32", (16,))
        for m in (3, 7):
            js.launch(sk.two_dynamic, 2, 8, out, 8, m)
            got[m] = out
            out = js.alloc_output("float32", (16,))
    u = np.arange(16) % 8
    for m, t in got.items():
        np.testing.assert_array_equal(
            t.download(), ((u + 1) % 8) * 2.0 + (u % m) * 3 + (u % 4) * 100
        )


def test_a_dynamic_size_beyond_the_workgroup_storage_is_unsupported(rt: Any) -> None:
    limit = rt.device_info.max_compute_workgroup_storage_size
    with webgpu_jit(rt) as js:
        out = js.alloc_output("float32", (16,))
        with pytest.raises(UnsupportedError, match="at this launch's sizes"):
            js.launch(sk.two_dynamic, 2, 8, out, limit // 4, 3)


def test_a_two_dimensional_tile_transposes(rt: Any) -> None:
    m = RNG.standard_normal((19, 12)).astype(np.float32)
    out = View.compact(np.zeros((12, 19), np.float32))
    (got, _) = run(rt, sk.tile_transpose, (3, 2), (sk.TILE, sk.TILE), out, View.compact(m))
    np.testing.assert_array_equal(got.reshape(12, 19, order="F"), m.T)

"""Matrix fragments on WebGPU (loops over each unit's private copy: no cooperative matrix in
wgpu or llvmpipe), equal to the interpreter bit for bit, the f16 GEMM included."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from support import matrix_kernels as mk
from support.webgpu_harness import View, assert_same, webgpu_jit
from tenferro_host_webgpu._wgsl import uses_loops

from tenferro_host import InvalidLaunchConfigError, UnsupportedError, dtypes
from tenferro_host import kernel as K
from tenferro_host.benchmarks import gemm_f16 as gemm

RNG = np.random.default_rng(27)


@pytest.fixture(autouse=True)
def _shader_f16(rt: Any) -> None:
    if not rt.device_info.shader_f16:
        pytest.skip("the adapter does not offer shader-f16 (f16 tensors need it on WebGPU)")


def f16(n: int) -> np.ndarray:
    return RNG.standard_normal(n).astype(np.float16)


def test_column_major_tiles_of_two_cubes(rt: Any) -> None:
    ld = 24
    c = RNG.standard_normal(4 * 16 * ld).astype(np.float32)
    a, b = f16(c.size), f16(c.size)
    args = (View.compact(c), View.compact(a), View.compact(b), np.uint32(ld))
    assert_same(rt, mk.tile_col, 2, 64, *args)


@pytest.mark.parametrize("m,n", [(16, 16), (32, 8), (8, 32)])
def test_row_major_shapes_from_shared_memory(rt: Any, m: int, n: int) -> None:
    d = View.compact(np.zeros(m * n, np.float32))
    a, b = View.compact(f16(m * 16)), View.compact(f16(16 * n))
    assert_same(rt, mk.tile_row_shared, 1, 32, d, a, b, m=m, n=n)


def test_the_f16_gemm(rt: Any) -> None:
    m, n, k = 128, 256, 64
    a = View.compact(RNG.standard_normal((m, k)).astype(np.float16))
    b = View.compact(RNG.standard_normal((k, n)).astype(np.float16))
    c = View.compact(np.zeros((m, n), np.float32))
    # one stage of 16-deep slices: more take more than the 32 KiB of workgroup memory the
    # adapter grants (WebGPU counts an f16 shared element as 4 bytes)
    count = gemm.gemm_f16_count(m, n)
    assert_same(rt, gemm.gemm_f16, count, gemm.UNITS, c, a, b, step=16, stages=1)


def test_fragment_statements_count_as_loops_for_the_canary() -> None:
    spec = mk.fill_and_store.specialize(
        [K.ArrayDesc(dtypes.float32, 1), K.ScalarDesc(dtypes.float32)], {}, "webgpu"
    )
    assert uses_loops(spec.ir.body)  # no IR loop: the fill and the store loop in WGSL


def test_a_fragment_store_into_memory_atomics_use(rt: Any) -> None:
    c, back = View.compact(np.zeros(257, np.float32)), View.compact(np.zeros(256, np.float32))
    assert_same(rt, mk.store_beside_atomics, 1, 32, c, back)


def test_a_partial_warp_of_fragments_is_refused_before_it_runs(rt: Any) -> None:
    out = rt.upload(np.zeros(512, np.float32))
    with webgpu_jit(rt) as js:
        with pytest.raises(InvalidLaunchConfigError, match="launch a multiple of 32 units"):
            js.launch(mk.fill_and_store, 1, 48, out, np.float32(1))


def test_fragments_without_shader_f16_are_refused_naming_the_feature(fresh_rt: Any) -> None:
    fresh_rt._info = dataclasses.replace(fresh_rt.device_info, shader_f16=False)
    c = fresh_rt.upload(np.zeros(512, np.float32))
    a, b = (fresh_rt.upload(f16(512)) for _ in range(2))
    with webgpu_jit(fresh_rt) as js:
        with pytest.raises(UnsupportedError, match="'shader-f16' feature; use f32") as info:
            js.launch(mk.tile_col, 1, 64, c, a, b, np.uint32(16))
    assert info.value.feature == "shader-f16"

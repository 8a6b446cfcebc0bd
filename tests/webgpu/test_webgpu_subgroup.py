"""Subgroup operations on WebGPU: the ``subgroup`` feature's builtins (llvmpipe offers it) and
the fallback through workgroup memory, against numpy and the interpreter run at the adapter's
subgroup size."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from support import subgroup_kernels as sk
from support.webgpu_harness import View, on_interpreter, on_target, webgpu_jit
from tenferro_host_webgpu import _wgsl

from tenferro_host import UnsupportedError
from tenferro_host.compile_only import compile_only

RNG = np.random.default_rng(26)


@pytest.fixture(params=["native", "fallback"])
def subgroup_rt(request: pytest.FixtureRequest, fresh_rt: Any) -> Any:
    """A runtime whose kernels use the device's subgroups, or (its info saying the device has
    none) the fallback through workgroup memory."""
    info = fresh_rt.device_info
    if request.param == "native":
        if not info.subgroups:
            pytest.skip("the adapter does not offer the 'subgroup' feature")
    else:
        fresh_rt._info = dataclasses.replace(info, subgroups=False)
    return fresh_rt


def _subgroup_size(rt: Any) -> int:
    facts = View.compact(np.zeros(2 * 64, np.uint32))
    ints = [View.compact(np.zeros(n, np.int32)) for n in (3 * 64, 2 * 64)]
    x = View.compact(np.zeros(64, np.int32))
    ballot = View.compact(np.zeros(64, np.uint32))
    out = on_target(
        rt, lambda: webgpu_jit(rt), sk.subgroup_constructs, 1, 64, facts, *ints, ballot, x
    )
    return int(out[0][0])


def test_the_warp_shuffle_sum_matches_numpy(subgroup_rt: Any) -> None:
    x = RNG.integers(-50, 50, 100_003).astype(np.float32)  # exact sums in any order
    out = View.compact(np.zeros(1, np.float32))
    (got, _) = on_target(
        subgroup_rt, lambda: webgpu_jit(subgroup_rt), sk.subgroup_sum, 7, 256, out, View.compact(x)
    )
    assert got[0] == x.sum(dtype=np.float64)


def test_the_fused_row_softmax_matches_numpy(subgroup_rt: Any) -> None:
    x = RNG.standard_normal((6, 1000)).astype(np.float32) * 4
    out = View.compact(np.zeros_like(x))
    (got, _) = on_target(
        subgroup_rt, lambda: webgpu_jit(subgroup_rt), sk.row_softmax, 6, 128, out, View.compact(x)
    )
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        got.reshape(x.shape, order="F"), e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-9
    )


def test_every_construct_matches_the_interpreter_at_the_adapters_size(subgroup_rt: Any) -> None:
    size = _subgroup_size(subgroup_rt)
    n = 96  # three cubes of 32: whole subgroups at every size up to 32
    facts = View.compact(np.zeros(2 * n, np.uint32))
    red, shuf = View.compact(np.zeros(3 * n, np.int32)), View.compact(np.zeros(2 * n, np.int32))
    ballot = View.compact(np.zeros(n, np.uint32))
    x = View.compact(RNG.integers(-9, 9, n).astype(np.int32))
    args = (facts, red, shuf, ballot, x)
    expected = on_interpreter(sk.subgroup_constructs, 3, 32, *args, subgroup_size=size)
    got = on_target(
        subgroup_rt, lambda: webgpu_jit(subgroup_rt), sk.subgroup_constructs, 3, 32, *args
    )
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_array_equal(g, e)
    f = View.compact(RNG.integers(-9, 9, n).astype(np.float32))
    fred = View.compact(np.zeros(3 * n, np.float32))
    expected = on_interpreter(sk.float_reductions, 3, 32, fred, f, subgroup_size=size)
    got = on_target(
        subgroup_rt, lambda: webgpu_jit(subgroup_rt), sk.float_reductions, 3, 32, fred, f
    )
    np.testing.assert_array_equal(got[0], expected[0])


def test_the_subgroup_size_is_the_devices_or_the_fallbacks(subgroup_rt: Any) -> None:
    size = _subgroup_size(subgroup_rt)
    if subgroup_rt.device_info.subgroups:
        assert size & (size - 1) == 0 and 1 <= size <= 128
    else:
        assert size == _wgsl.FALLBACK_SIZE


def test_subgroup_ops_in_branches_no_subgroup_splits(subgroup_rt: Any) -> None:
    x = View.compact(RNG.integers(-9, 9, 128).astype(np.float32))
    out = View.compact(np.zeros(128, np.float32))
    kernel = sk.reductions_in_cube_uniform_branches
    if not subgroup_rt.device_info.subgroups:  # the fallback needs the whole cube: refused
        with pytest.raises(UnsupportedError, match="top level of the kernel body"):
            on_target(subgroup_rt, lambda: webgpu_jit(subgroup_rt), kernel, 4, 32, out, x)
        return
    size = _subgroup_size(subgroup_rt)
    expected = on_interpreter(kernel, 4, 32, out, x, subgroup_size=size)
    got = on_target(subgroup_rt, lambda: webgpu_jit(subgroup_rt), kernel, 4, 32, out, x)
    np.testing.assert_array_equal(got[0], expected[0])


def test_a_subgroup_op_in_a_branch_has_no_fallback(fresh_rt: Any) -> None:
    fresh_rt._info = dataclasses.replace(fresh_rt.device_info, subgroups=False)
    x = fresh_rt.upload(np.zeros(32, np.float32))
    with pytest.raises(UnsupportedError, match=r"subgroup_kernels.py:\d+: this adapter has no"):
        with webgpu_jit(fresh_rt) as js:
            js.launch(sk.divergent_subgroup_add, 1, 32, x)


def test_the_fallbacks_workgroup_array_counts_in_the_workgroup_storage(fresh_rt: Any) -> None:
    """Shared floats that fit alone, with the fallback's 4 bytes per unit on top, do not: the
    launch is refused naming the kernel and both sizes, not by the driver at pipeline creation."""
    fresh_rt._info = dataclasses.replace(fresh_rt.device_info, subgroups=False)
    limit, cube = fresh_rt.device_info.max_compute_workgroup_storage_size, 256
    n = limit // 4 - cube // 2  # fits alone; with the fallback's cube * 4 bytes it does not
    with webgpu_jit(fresh_rt) as js:
        out = js.alloc_output("float32", (cube,))
        with pytest.raises(UnsupportedError, match="shared_then_subgroup_add") as info:
            js.launch(sk.shared_then_subgroup_add, 1, cube, out, n)
    message = str(info.value)
    assert f"{4 * n} bytes of shared arrays" in message
    assert f"{4 * cube} bytes" in message and f"grants {limit} bytes" in message
    assert "'subgroup' feature" in message and "smaller cube" in message


def test_shared_arrays_that_fit_beside_the_fallback_run(fresh_rt: Any) -> None:
    fresh_rt._info = dataclasses.replace(fresh_rt.device_info, subgroups=False)
    limit, cube = fresh_rt.device_info.max_compute_workgroup_storage_size, 64
    n = limit // 4 - cube  # exactly the storage with the fallback's array
    out = View.compact(np.zeros(cube, np.float32))
    (got,) = on_target(
        fresh_rt, lambda: webgpu_jit(fresh_rt), sk.shared_then_subgroup_add, 1, cube, out, n
    )
    lanes = np.arange(cube, dtype=np.float32).reshape(-1, _wgsl.FALLBACK_SIZE)
    np.testing.assert_array_equal(got, np.repeat(lanes.sum(axis=1), lanes.shape[1]))


@pytest.mark.parametrize("features", [(), ("subgroup",)])
def test_compile_only_wgsl_is_valid_for_the_features_named(fresh_rt: Any, features: Any) -> None:
    """The compile-only WGSL, native or fallback, passes the device's shader validation."""
    if features and not fresh_rt.device_info.subgroups:
        pytest.skip("the adapter does not offer the 'subgroup' feature")
    wgsl = compile_only(sk.row_softmax, "wgsl", ["float32[2]", "float32[2]"], features=features)
    fresh_rt._device.create_shader_module(code=wgsl.source)

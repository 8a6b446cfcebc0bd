"""Subgroup operations on the checking interpreter: the proof kernels against numpy at several
subgroup sizes, each construct against a numpy model of subgroups, and the refusals (a
subgroup operation not every unit of its subgroup reaches, a shuffle past the subgroup, wrong
types, a subgroup size that is not a power of two)."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
from support import subgroup_kernels as sk
from support.source_marks import marker_line
from support.webgpu_harness import View, on_interpreter

from tenferro_host import DslError, InvalidLaunchConfigError, UnsupportedError, ValidationError
from tenferro_host import kernel as K
from tenferro_host.compile_only import arg_desc, compile_only

RNG = np.random.default_rng(26)


@pytest.mark.parametrize("size", [32, 8, 4])
def test_the_warp_shuffle_sum_matches_numpy(size: int) -> None:
    x = RNG.integers(-50, 50, 10_001).astype(np.float32)
    out = View.compact(np.zeros(1, np.float32))
    (got, _) = on_interpreter(sk.subgroup_sum, 3, 128, out, View.compact(x), subgroup_size=size)
    assert got[0] == x.sum(dtype=np.float64)


@pytest.mark.parametrize("size", [32, 4])
def test_the_fused_row_softmax_matches_numpy(size: int) -> None:
    x = RNG.standard_normal((5, 300)).astype(np.float32) * 4
    out = View.compact(np.zeros_like(x))
    (got, _) = on_interpreter(sk.row_softmax, 5, 128, out, View.compact(x), subgroup_size=size)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        got.reshape(x.shape, order="F"), e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-9
    )


def _model(x: np.ndarray, cube: int, size: int) -> dict[str, np.ndarray]:
    """What each construct gives, from numpy: subgroups of ``size`` consecutive units."""
    n = x.size
    unit = np.arange(n) % cube
    lane = unit % size
    group = np.arange(n) // cube * cube + unit // size * size  # first unit of the subgroup
    members = np.minimum(size, cube - unit // size * size)
    red = np.zeros((n, 3), np.int64)
    shuf = np.zeros((n, 2), np.int64)
    ballot = np.zeros(n, np.uint64)
    for i in range(n):
        mine = x[group[i] : group[i] + members[i]]
        red[i] = mine.sum(), mine.min(), mine.max()
        shuf[i] = x[group[i] + (lane[i] ^ 1)], x[group[i] + lane[i] // 2]
        word = lane[i] // 32 * 32
        ballot[i] = sum(1 << j for j, v in enumerate(mine[word : word + 32]) if v > 0)
    facts = np.stack([np.full(n, size), lane], axis=1)
    return {"facts": facts, "red": red, "shuf": shuf, "ballot": ballot}


@pytest.mark.parametrize(("cube", "size"), [(48, 32), (32, 8), (64, 64), (16, 1)])
def test_each_construct_matches_a_model_of_subgroups(cube: int, size: int) -> None:
    n = 3 * cube  # with (48, 32) every cube ends in a partial subgroup
    x = RNG.integers(-9, 9, n).astype(np.int32)
    outs = [View.compact(np.zeros(k * n, t)) for k, t in ((2, np.uint32), (3, np.int32))]
    outs += [View.compact(np.zeros(2 * n, np.int32)), View.compact(np.zeros(n, np.uint32))]
    if size == 1:
        with pytest.raises(ValidationError):
            on_interpreter(
                sk.subgroup_constructs, 3, cube, *outs, View.compact(x), subgroup_size=size
            )  # lane 0 ^ 1 is past a 1-unit subgroup
        return
    got = on_interpreter(
        sk.subgroup_constructs, 3, cube, *outs, View.compact(x), subgroup_size=size
    )
    model = _model(x, cube, size)
    np.testing.assert_array_equal(got[0], model["facts"].reshape(-1))
    np.testing.assert_array_equal(got[1], model["red"].reshape(-1))
    np.testing.assert_array_equal(got[2], model["shuf"].reshape(-1))
    np.testing.assert_array_equal(got[3], model["ballot"])


def test_a_float_sum_rounds_as_the_xor_butterfly() -> None:
    x = RNG.standard_normal(32).astype(np.float32)
    out = View.compact(np.zeros(96, np.float32))
    (got, _) = on_interpreter(sk.float_reductions, 1, 32, out, View.compact(x))
    v = x.copy()
    for o in (1, 2, 4, 8, 16):
        v = v + v[np.arange(32) ^ o]  # float32 throughout, each lane the same sums
    assert got[0] == v[0] and got[1] == x.min() and got[2] == x.max()


def test_a_subgroup_op_in_a_divergent_branch_is_refused_naming_its_line() -> None:
    x = View.compact(np.ones(32, np.float32))
    with pytest.raises(
        K.DivergentSubgroupError, match=rf":{marker_line(sk, '# DIVERGENT')}: .*16 of the 32"
    ):
        on_interpreter(sk.divergent_subgroup_add, 1, 32, x)
    # a branch every unit of each subgroup takes alike is fine: subgroups of 2 split by parity
    with pytest.raises(K.DivergentSubgroupError):
        on_interpreter(sk.divergent_subgroup_add, 1, 32, x, subgroup_size=2)
    (got,) = on_interpreter(sk.divergent_subgroup_add, 1, 32, x, subgroup_size=1)
    np.testing.assert_array_equal(got, np.ones(32, np.float32))


def test_a_shuffle_past_the_subgroup_is_refused_naming_its_line() -> None:
    x = View.compact(np.ones(32, np.float32))
    with pytest.raises(
        ValidationError, match=rf":{marker_line(sk, '# PAST')}: the shuffle reads lane 32"
    ):
        on_interpreter(
            sk.shuffle_past_the_subgroup, 1, 32, View.compact(np.zeros(32, np.float32)), x
        )


def test_wrong_types_are_dsl_errors() -> None:
    @K.kernel
    def f64_sum(x: K.Array[K.f64]):
        x[0] = K.subgroup_add(x[0])

    @K.kernel
    def int_ballot(x: K.Array[K.u32]):
        x[0] = K.subgroup_ballot(x[0])

    f64 = [K.ArrayDesc(K.f64.dtype, 1)]
    with pytest.raises(DslError, match="f32, i32 or u32 value"):
        f64_sum.specialize(f64, {}, "cpu")
    with pytest.raises(DslError, match="needs a bool"):
        int_ballot.specialize([K.ArrayDesc(K.u32.dtype, 1)], {}, "cpu")


@pytest.mark.parametrize("size", [0, 3, 256])
def test_a_subgroup_size_that_is_not_a_power_of_two_up_to_128_is_refused(size: int) -> None:
    x = View.compact(np.ones(32, np.float32))
    with pytest.raises(InvalidLaunchConfigError, match=f"subgroup size {size}"):
        on_interpreter(sk.divergent_subgroup_add, 1, 32, x, subgroup_size=size)


# ------------------------------------------------------------ refusals on every target


def _compile(kernel: K.Kernel, target: str, sig: list[str], **options: Any) -> Any:
    """Specialize for ``cpu`` (the interpreter's target) or compile for ``cuda``/``wgsl``."""
    if target == "cpu":
        return kernel.specialize([arg_desc(s) for s in sig], {}, "cpu")
    if target == "cuda":
        pytest.importorskip("cuda.bindings", reason="the cuda target needs the cuda extra")
    return compile_only(kernel, target, sig, **options)


TARGETS = ["cpu", "cuda", "wgsl"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "kernel,dtype,marker",
    [
        (sk.float_add, "f16", "FLOAT_ADD"),
        (sk.float_add, "f64", "FLOAT_ADD"),
        (sk.int_shuffle, "i64", "INT_SHUFFLE"),
    ],
)
def test_a_subgroup_op_on_a_type_no_target_exchanges_is_refused_on_every_target(
    kernel: K.Kernel, dtype: str, marker: str, target: str
) -> None:
    with pytest.raises(DslError, match=r"takes an f32, i32 or u32 value .* cast with K\.f32") as e:
        _compile(kernel, target, [f"{getattr(K, dtype).dtype.name}[1]"])
    assert e.value.lineno == marker_line(sk, f"# {marker}") and f"not {dtype};" in str(e.value)


@pytest.mark.parametrize("target", TARGETS)
def test_a_constant_lane_past_every_subgroup_is_refused_on_every_target(target: str) -> None:
    with pytest.raises(DslError, match=r"reads lane 128, which is past every subgroup of at most "):
        _compile(sk.shuffle_lane_128, target, ["float32[1]", "float32[1]"])


@pytest.mark.parametrize(
    "kernel,marker,what",
    [(sk.shuffle_lane_40, "LANE40", "lane 40"), (sk.shuffle_xor_mask_32, "MASK32", "lane \\^ 32")],
)
def test_a_constant_lane_past_32_units(kernel: K.Kernel, marker: str, what: str) -> None:
    """CUDA (warps of 32) and WebGPU's fallback (subgroups of 32) refuse it before the kernel
    runs, the interpreter at 32 units when it reads; subgroups of 64 have the lane."""
    sig = ["float32[1]", "float32[1]"]
    line = marker_line(sk, f"# {marker}")
    if importlib.util.find_spec("cuda.bindings") is not None:
        with pytest.raises(DslError, match=rf"on cuda \(subgroups are warps of 32\): .*{what}"):
            compile_only(kernel, "cuda", sig)
    with pytest.raises(UnsupportedError, match=rf":{line}: .*fallback's subgroups have 32 units"):
        compile_only(kernel, "wgsl", sig)
    assert "subgroupShuffle" in compile_only(kernel, "wgsl", sig, features=["subgroup"]).source
    x = View.compact(RNG.integers(-9, 9, 64).astype(np.float32))
    out = View.compact(np.zeros(64, np.float32))
    with pytest.raises(ValidationError, match=rf":{line}: the shuffle reads"):
        on_interpreter(kernel, 1, 64, out, x)
    (got, _) = on_interpreter(kernel, 1, 64, out, x, subgroup_size=64)
    lanes = np.full(64, 40) if kernel is sk.shuffle_lane_40 else np.arange(64) ^ 32
    np.testing.assert_array_equal(got, x.storage[lanes])

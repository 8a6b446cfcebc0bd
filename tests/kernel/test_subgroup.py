"""Subgroup operations on the checking interpreter: the proof kernels against numpy at several
subgroup sizes, each construct against a numpy model of subgroups, and the refusals (a
subgroup operation not every unit of its subgroup reaches, a shuffle past the subgroup, wrong
types, a subgroup size that is not a power of two)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from support import subgroup_kernels as sk
from support.webgpu_harness import View, on_interpreter

from tenferro_host import DslError, InvalidLaunchConfigError, ValidationError
from tenferro_host import kernel as K

RNG = np.random.default_rng(26)


def _line(marker: str) -> int:
    lines = inspect.getsource(sk).splitlines()
    return next(k for k, text in enumerate(lines, 1) if f"# {marker}" in text)


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
    with pytest.raises(K.DivergentSubgroupError, match=rf":{_line('DIVERGENT')}: .*16 of the 32"):
        on_interpreter(sk.divergent_subgroup_add, 1, 32, x)
    # a branch every unit of each subgroup takes alike is fine: subgroups of 2 split by parity
    with pytest.raises(K.DivergentSubgroupError):
        on_interpreter(sk.divergent_subgroup_add, 1, 32, x, subgroup_size=2)
    (got,) = on_interpreter(sk.divergent_subgroup_add, 1, 32, x, subgroup_size=1)
    np.testing.assert_array_equal(got, np.ones(32, np.float32))


def test_a_shuffle_past_the_subgroup_is_refused_naming_its_line() -> None:
    x = View.compact(np.ones(32, np.float32))
    with pytest.raises(ValidationError, match=rf":{_line('PAST')}: the shuffle reads lane 32"):
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

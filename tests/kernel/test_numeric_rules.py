"""The DSL's numeric rules, one case each, on every available target (cpu; WebGPU, the software
adapter in CI; CUDA on a GPU machine), against values numpy computes independently."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.errors import UnsupportedError

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("webgpu", marks=pytest.mark.webgpu, id="webgpu"),
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.cuda], id="cuda"),
]


@functools.cache
def _host() -> tf.Host:
    """One host for the module: every test reuses its runtimes (a CUDA context each)."""
    return tf.Host()


class Target:
    def __init__(self, name: str) -> None:
        host = _host()
        status = host.backend_status(name)
        if not status.available:
            pytest.skip(f"no {name} device: {status.reason}")
        self.name = name
        self.rt = host.backend(name)

    @contextmanager
    def jit(self) -> Iterator[Any]:
        module = getattr(tf, self.name)
        with self.rt.session() as s, module.exec_session(s).jit("tests.numeric_rules") as js:
            yield js

    def run(
        self,
        kernel: K.Kernel,
        n: int,
        *arrays: Any,
        out: str = "float32",
        outs: int = 1,
        **consts: Any,
    ) -> list[np.ndarray]:
        """Launch over ``n`` threads with fresh zeroed outputs first; their contents."""
        results = [self.rt.zeros(out, n) for _ in range(outs)]
        args = [self.rt.upload(a) if isinstance(a, np.ndarray) else a for a in arrays]
        with self.jit() as js:
            js.launch(kernel, 1, n, *results, *args, **consts)
        return [r.download() for r in results]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    return Target(request.param)


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def assert_same_floats(got: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit, NaN equal to NaN, and the sign of a zero counts."""
    assert got.dtype == expected.dtype
    same = (got == expected) & (np.signbit(got) == np.signbit(expected))
    same |= np.isnan(got) & np.isnan(expected)
    assert same.all(), f"got {got.tolist()}, expected {expected.tolist()}"


# ------------------------------------------------------------ ** is C pow


@K.kernel
def power(out: K.Array[K.f32], x: K.Array[K.f32], y: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] ** y[i]


def test_pow_follows_c_for_negative_bases_and_special_values(target):
    nan, inf = np.nan, np.inf
    x = f32(-2, -3, -2, 0, nan, 1, -8, -inf, -inf, 0, -0.0, -1, 0.5, 2, -0.5, -2)
    y = f32(3, 3, 2, 0, 0, nan, 1 / 3, 3, 2, -1, -1, inf, -inf, -inf, 3, -2)
    (got,) = target.run(power, len(x), x, y)
    with np.errstate(all="ignore"):
        expected = np.power(x, y)
    # special values exactly; ordinary results within WGSL's pow accuracy (exp2(y * log2(x)))
    ordinary = np.isfinite(expected) & (expected != 0)
    assert_same_floats(got[~ordinary], expected[~ordinary])
    np.testing.assert_allclose(got[ordinary], expected[ordinary], rtol=1e-5)


def test_integer_exponents_are_exact_by_repeated_squaring(target):
    """|y| <= 64: exact wherever the result is representable (as numpy's powf); otherwise the
    rounded products of right-to-left squaring, identically on every target."""
    x = f32(-2, 3, 2, -3, 1.5, -1.25, 3, 2, -2, 2, 0.5, -0.0, 1e-30, 10)
    y = f32(3, 2, -2, 15, 7, 5, -1, 64, 63, -64, -64, -3, -2, -50)
    (got,) = target.run(power, len(x), x, y)
    with np.errstate(all="ignore"):
        expected = np.power(x, y)
    assert got[:3].tolist() == [-8.0, 9.0, 0.25]
    assert_same_floats(got, expected)  # 1e-30 ** -2 overflows to inf, 10 ** -50 to 0
    a = np.float32(1.3)  # 1.3 ** 5 = 1.3 * ((1.3 * 1.3) * (1.3 * 1.3)), each product rounded
    chain = f32(a * ((a * a) * (a * a)))
    (inexact,) = target.run(power, 1, f32(1.3), f32(5))
    assert_same_floats(inexact, chain)
    assert chain[0] != np.power(a, np.float32(5))  # where C powf rounds the exact value once


# ------------------------------------------------------------ NaN comparisons


@K.kernel
def nan_rules(
    ne: K.Array[K.bool_],
    eq: K.Array[K.bool_],
    lt: K.Array[K.bool_],
    truth: K.Array[K.bool_],
    x: K.Array[K.f32],
    y: K.Array[K.f32],
):
    i = K.ABSOLUTE_POS
    if i < x.len:
        ne[i] = x[i] != x[i]
        eq[i] = x[i] == y[i]
        lt[i] = not (x[i] >= y[i])
        truth[i] = K.bool_(x[i])


def test_nan_compares_unordered_and_is_true(target):
    x = f32(np.nan, 1, 0, np.nan, -0.0)
    y = f32(np.nan, 1, np.nan, 2, 0)
    ne, eq, lt, truth = target.run(nan_rules, len(x), x, y, out="bool", outs=4)
    assert ne.tolist() == [True, False, False, True, False]
    assert eq.tolist() == [False, True, False, False, True]
    assert lt.tolist() == [True, False, True, True, False]
    assert truth.tolist() == [True, True, False, True, False]


@K.kernel
def nan_ignoring(lo: K.Array[K.f32], hi: K.Array[K.f32], x: K.Array[K.f32], y: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < x.len:
        lo[i] = K.min(x[i], y[i])
        hi[i] = K.max(x[i], y[i])


def test_float_min_max_return_the_non_nan_operand_and_order_zeros(target):
    x, y = (
        f32(np.nan, 1, np.nan, -np.inf, 0, -0.0, -0.0, 0),
        f32(2, np.nan, np.nan, 3, -0.0, 0, -0.0, 0),
    )
    lo, hi = target.run(nan_ignoring, len(x), x, y, outs=2)
    assert_same_floats(lo, f32(2, 1, np.nan, -np.inf, -0.0, -0.0, -0.0, 0))
    assert_same_floats(hi, f32(2, 1, np.nan, 3, 0, 0, -0.0, 0))


# ------------------------------------------------------------ % is fmod


@K.kernel
def remainder(out: K.Array[K.f32], x: K.Array[K.f32], y: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] % y[i]


def test_float_remainder_is_exact_fmod(target):
    x = f32(1e10, 1e7, 16777216, 1.5, 3.4e38, -7.5, 5, np.inf, 2, 0, -0.0, 1e-40, 3e-39, 7)
    y = f32(3, 0.1, 88.8, np.inf, 0.5, 2, 0, 1, np.nan, 3, 3, 3e-41, 1e-39, -2)
    (got,) = target.run(remainder, len(x), x, y)
    with np.errstate(all="ignore"):
        expected = np.fmod(x, y)
    if target.name == "webgpu":  # WGSL may flush subnormals: the two subnormal cases may read 0
        sub = (np.abs(expected) < np.finfo(np.float32).tiny) & (expected != 0)
        got, expected = got[~sub], expected[~sub]
    assert_same_floats(got, expected)


# ------------------------------------------------------------ float -> int saturates


@K.kernel
def to_ints(u: K.Array[K.u32], s: K.Array[K.i32], x: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < x.len:
        u[i] = K.u32(x[i])
        s[i] = K.i32(x[i])


def test_float_to_int_casts_truncate_saturate_and_map_nan_to_zero(target):
    x = f32(-1.5, -100, 3e9, np.inf, np.nan, -np.inf, 2.9, -2.9, 2147483520, 5e9)
    results = [target.rt.zeros("uint32", len(x)), target.rt.zeros("int32", len(x))]
    with target.jit() as js:
        js.launch(to_ints, 1, len(x), *results, target.rt.upload(x))
    u, s = (r.download() for r in results)
    assert u.tolist() == [0, 0, 3000000000, 2**32 - 1, 0, 0, 2, 0, 2147483520, 2**32 - 1]
    assert s.tolist() == [-1, -100, 2**31 - 1, 2**31 - 1, 0, -(2**31), 2, -2, 2147483520, 2**31 - 1]


# ------------------------------------------------------------ each operation rounds


@K.kernel
def rounding_error(out: K.Array[K.f32], a: K.Array[K.f32], b: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        t = a[i] + b[i]
        out[i] = (t - a[i]) - b[i]  # the rounding error of a + b (TwoSum): not folded to 0


@K.kernel
def product_plus(out: K.Array[K.f32], a: K.Array[K.f32], c: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = a[i] * a[i] + c[i]  # two roundings: never contracted into an fma


def test_float_operations_are_neither_reassociated_nor_contracted(target):
    a, b = f32(1e8, 1.0, 16777216.0), f32(1.0, 1e-8, 1.0)
    (got,) = target.run(rounding_error, 3, a, b)
    assert_same_floats(got, ((a + b) - a) - b)
    a = f32(1 + 2**-12)
    c = -(a * a)  # the rounded square: a fused a * a + c would leave 2^-24
    (got,) = target.run(product_plus, 1, a, c)
    assert_same_floats(got, f32(0.0))


# ------------------------------------------------------------ conditions evaluate once


@K.kernel
def if_flag(out: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    flag = i < 2
    r = K.i32(0)
    if flag:
        flag = False
        r = 1
    else:
        r = 10
    if i < out.len:
        out[i] = r


@K.kernel
def range_stop_local(out: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    n = 5
    count = 0
    for _j in range(n):
        n = 2
        count += 1
    if i < out.len:
        out[i] = count


@K.kernel
def range_step_local(out: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    step = 1
    count = 0
    for _j in range(0, 8, step):
        step = 4
        count += 1
    if i < out.len:
        out[i] = count


def test_if_conditions_and_range_bounds_are_evaluated_once(target):
    assert target.run(if_flag, 4, out="int32")[0].tolist() == [1, 1, 10, 10]
    assert target.run(range_stop_local, 4, out="int32")[0].tolist() == [5] * 4
    assert target.run(range_step_local, 4, out="int32")[0].tolist() == [8] * 4


@K.kernel
def below_zero(out: K.Array[K.i32]):
    k = 0
    k = k - 1
    if k < 0:
        out[0] = k


def test_an_untyped_int_local_is_signed(target):
    assert target.run(below_zero, 1, out="int32")[0].tolist() == [-1]


# ------------------------------------------------------------ constants


@K.kernel
def constants(out: K.Array[K.f32], eps: K.Const[K.f32]):
    i = K.ABSOLUTE_POS
    if i == 0:
        out[0] = K.f32(1.0) / eps
        out[1] = K.sqrt(K.f32(-1.0))
        out[2] = K.f32(3e38) * K.f32(10.0)
        out[3] = K.f32(K.u32(-1.0)) * (K.f32(0.0) - out[2])  # 0 * -inf


def test_constant_expressions_give_ieee_results_everywhere(target):
    (got,) = target.run(constants, 4, eps=0.0)
    assert_same_floats(got, f32(np.inf, np.nan, np.inf, np.nan))


# ------------------------------------------------------------ long loops


@K.kernel
def count_to(out: K.Array[K.u32], n: K.u32):
    acc = K.u32(0)
    for _j in range(n):
        acc += 1
    if K.ABSOLUTE_POS < out.len:  # noqa: SIM300 - the thread's index, not a constant
        out[K.ABSOLUTE_POS] = acc


def test_a_long_loop_is_right_or_refused(target):
    software = target.name == "webgpu" and target.rt.device_info.software
    if software:  # llvmpipe cuts an invocation's loops after 65535 trips: refused, not wrong
        with pytest.raises(UnsupportedError, match="65535") as info:
            target.run(count_to, 1, 100_000, out="uint32")
        assert info.value.feature == "more than 65535 loop iterations per invocation"
        assert target.run(count_to, 1, 60_000, out="uint32")[0].tolist() == [60_000]
    else:
        assert target.run(count_to, 1, 100_000, out="uint32")[0].tolist() == [100_000]


# ------------------------------------------------------------ CUDA C for every rule kernel

F32, U32, I32, B = (K.ArrayDesc(dtypes.dtype(t), 1) for t in ("float32", "uint32", "int32", "bool"))
RULE_KERNELS = [
    (power, [F32, F32, F32], {}),
    (nan_rules, [B, B, B, B, F32, F32], {}),
    (nan_ignoring, [F32] * 4, {}),
    (remainder, [F32] * 3, {}),
    (to_ints, [U32, I32, F32], {}),
    (rounding_error, [F32] * 3, {}),
    (product_plus, [F32] * 3, {}),
    (if_flag, [I32], {}),
    (range_stop_local, [I32], {}),
    (range_step_local, [I32], {}),
    (below_zero, [I32], {}),
    (constants, [F32], {"eps": 0.0}),
    (count_to, [U32, K.ScalarDesc()], {}),
]


@pytest.mark.parametrize(
    "kern,descs,consts", RULE_KERNELS, ids=[k.name for k, _, _ in RULE_KERNELS]
)
def test_rule_kernels_compile_for_sm90(kern, descs, consts):
    """So a GPU run never meets a kernel of this file that NVRTC rejects."""
    from support.nvrtc_compile import compile_sm90
    from tenferro_host_cuda_jit._codegen import generate

    spec = kern.specialize(descs, consts, "cuda", ("sm_90",))
    assert compile_sm90(generate(spec).source) > 0

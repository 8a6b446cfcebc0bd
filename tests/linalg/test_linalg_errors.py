"""Every wrong input to a linalg op is a typed error that says what was wrong (on CPU, where
the checks run before any backend work; every variant shares them)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from tenferro_host_linalg import cupy_bridge, dsl, einsum_chain

import tenferro_host as tf


@pytest.fixture
def cpu(host):
    return host.backend("cpu")


def _t(cpu, shape, dtype=np.float32):
    return cpu.upload(np.ones(shape, dtype=dtype))


MATMUL, BATCHED = "linalg.matmul", "linalg.batched_matmul"
F32, F64, I32 = np.float32, np.float64, np.int32
GEMM_CASES = [
    # (op, a shape, b shape, a dtype, b dtype, error, argument, message)
    (MATMUL, (2, 3), (3, 2), F32, F64, tf.DTypeError, "b", "one dtype"),
    (MATMUL, (2, 3), (3, 2), I32, I32, tf.DTypeError, "a", "takes float32"),
    (MATMUL, (3,), (3, 2), F32, F32, tf.ShapeError, "a", "2 dimensions"),
    (MATMUL, (2, 3, 2), (3, 2, 2), F32, F32, tf.ShapeError, "a", "batched_matmul"),
    (MATMUL, (2, 3), (4, 2), F32, F32, tf.ShapeError, "b", "must equal"),
    (BATCHED, (2, 3, 4), (3, 2, 5), F32, F32, tf.ShapeError, "b", "batch dimensions differ"),
    (BATCHED, (2,), (2, 2), F32, F32, tf.ShapeError, "a", "at least 2"),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: f"{c[0]}-{c[-1]}")
def test_gemm_operands_are_checked(host, cpu, case):
    op, sa, sb, da, db, error, argument, message = case
    with pytest.raises(error, match=message) as info:
        host.run(op, _t(cpu, sa, da), _t(cpu, sb, db))
    assert info.value.argument == argument and info.value.op == op


TENSORDOT_AXES = [
    (4, "between 0 and 2"),
    (-1, "between 0 and 2"),
    (((0, 1), (0,)), "pair them"),
    (((0, 0), (0, 1)), "repeat an axis"),
    (((5,), (0,)), "in range"),
    ((("x",), (0,)), "in range"),
    ("ab", "must be ints in range"),
    ((1, 2, 3), "an int or a pair"),
]


@pytest.mark.parametrize(("axes", "message"), TENSORDOT_AXES, ids=str)
def test_tensordot_axes_are_checked(host, cpu, axes, message):
    with pytest.raises(tf.ValidationError, match=message) as info:
        host.run("linalg.tensordot", _t(cpu, (2, 3)), _t(cpu, (3, 2)), axes=axes)
    assert info.value.argument == "axes"


def test_tensordot_sizes_must_match(host, cpu):
    with pytest.raises(tf.ShapeError, match="has size 3 in one place and 2"):
        host.run("linalg.tensordot", _t(cpu, (2, 3)), _t(cpu, (2, 3)), axes=1)


EINSUM_SPECS = [
    (3, tf.ValidationError, "spec"),  # this op's check, or the host's attribute type check
    ("i...j,jk->ik", tf.ValidationError, "'...' is not supported"),
    ("ij,jk,kl->il", tf.ValidationError, "must name 2 operands"),
    ("i1,jk->ik", tf.ValidationError, "with letters"),
    ("ii,ik->ik", tf.ValidationError, "repeat a letter"),
    ("ij,jk->iz", tf.ValidationError, "distinct letters of the inputs"),
    ("ij,jk->ii", tf.ValidationError, "distinct letters of the inputs"),
    ("ijk,jk->ik", tf.ShapeError, "has 2 dimensions but 3 labels"),
    ("ij,ik->jk", tf.ShapeError, "label 'i' has size 2 in one place and 3"),
]


@pytest.mark.parametrize(("spec", "error", "message"), EINSUM_SPECS, ids=str)
def test_einsum_spec_is_checked(host, cpu, spec, error, message):
    with pytest.raises(error, match=message) as info:
        host.run("linalg.einsum", _t(cpu, (2, 3)), _t(cpu, (3, 4)), spec=spec)
    assert info.value.op == "linalg.einsum"


def test_einsum_chain_needs_two_operands(cpu):
    with cpu.session() as s, pytest.raises(tf.ValidationError, match="at least 2 operands"):
        einsum_chain(s.exec_session(), "ij->ij", _t(cpu, (2, 2)))


@pytest.mark.parametrize(
    ("axis", "message"),
    [
        (3, "out of range"),
        (-4, "out of range"),
        ((0, -3), "repeats an axis"),
        (1.0, "None, an int or a sequence"),
        (True, "axis.* True"),
        ("0", "None, an int or a sequence"),
    ],
    ids=str,
)
def test_sum_axis_is_checked(host, cpu, axis, message):
    with pytest.raises(tf.ValidationError, match=message) as info:
        host.run("linalg.sum", _t(cpu, (2, 3, 4)), axis=axis)
    assert info.value.argument == "axis"


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "error", "message"),
    [
        ("linalg.sum", (3,), np.int64, tf.DTypeError, "takes float32"),
        ("linalg.norm", (3,), np.float16, tf.DTypeError, "takes float32"),
        ("linalg.qr", (3, 3), np.float16, tf.DTypeError, "takes float32"),
        ("linalg.qr", (3, 3, 3), np.float32, tf.ShapeError, "takes a matrix"),
        ("linalg.svd", (3,), np.float64, tf.ShapeError, "takes a matrix"),
        ("linalg.svd", (2, 2), np.int32, tf.DTypeError, "takes float32"),
    ],
    ids=lambda v: str(v),
)
def test_single_operand_ops_check_their_input(host, cpu, op, shape, dtype, error, message):
    with pytest.raises(error, match=message):
        host.run(op, _t(cpu, shape, dtype))


def test_dsl_variants_refuse_dtypes_their_kernels_lack(cpu):
    """f16 and complex are the op's dtypes but not the DSL kernels': a typed refusal of the
    variant (UnsupportedError naming the dtype), after the op's own dtype check."""
    with cpu.session() as s:
        ex = s.exec_session()
        for dt, variants in [
            (np.complex64, (dsl.matmul, dsl.batched_matmul, dsl.sum, dsl.norm)),
            (np.float16, (dsl.matmul, dsl.sum)),
        ]:
            x = _t(cpu, (2, 2), dt)
            for variant in variants:
                args = (x, x) if variant in (dsl.matmul, dsl.batched_matmul) else (x,)
                with pytest.raises(tf.UnsupportedError, match="DSL variant on cpu:0") as info:
                    variant(ex, *args)
                assert info.value.feature == np.dtype(dt).name
        with pytest.raises(tf.DTypeError, match="takes float32"):
            dsl.sum(ex, _t(cpu, (2,), np.int32))
        with pytest.raises(tf.DTypeError, match="takes float32"):
            dsl.norm(ex, _t(cpu, (2,), np.float16))


def test_missing_cupy_is_a_typed_reason(monkeypatch):
    """Without CuPy the cuda variants refuse with the install hint (here CuPy is hidden)."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    cupy_bridge.cupy_missing_reason.cache_clear()
    try:
        reason = cupy_bridge.cupy_missing_reason()
        assert reason is not None and "pip install cupy-cuda13x" in reason
        with pytest.raises(tf.UnsupportedError, match="through CuPy") as info:
            cupy_bridge.require_cupy("linalg.matmul", "cuda:0")
        assert info.value.feature == "cupy" and info.value.reason == reason
        assert info.value.backend == "cuda:0" and info.value.op == "linalg.matmul"
    finally:
        cupy_bridge.cupy_missing_reason.cache_clear()


@pytest.mark.parametrize("op", ["linalg.svd", "linalg.qr"])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_factorizations_refuse_non_finite_input_before_lapack(host, cpu, op, bad):
    """LAPACK's SVD loops forever on some inputs with an inf and raises an untyped
    LinAlgError on a NaN: the cpu variants check the input first (this 17x3 case hung)."""
    a = np.random.default_rng(680).standard_normal((17, 3)).astype(np.float32)
    a[15, 0] = bad
    with pytest.raises(tf.ValidationError, match=r"a\[15, 0\] is .*needs finite input") as info:
        host.run(op, cpu.upload(a))
    assert info.value.op == op and info.value.argument == "a"


def test_norm_of_a_0d_tensor(host, cpu):
    got = host.run("linalg.norm", cpu.upload(np.array(-2.0, np.float32))).download()
    assert got.shape == () and float(got) == 2.0


def test_einsum_with_an_empty_operand_is_zero_even_beside_inf(host, backend_name):
    """A sum over no terms is 0: summing a lone label first gave inf * 0 = NaN."""
    be = host.backend(backend_name)
    a, b = np.array([[np.inf]], np.float32), np.ones((1, 0), np.float32)
    for spec in ("ab,bc->", "ab,bc->a"):
        got = host.run("linalg.einsum", be.upload(a), be.upload(b), spec=spec).download()
        want = np.einsum(spec, a, b)
        assert got.shape == want.shape and np.array_equal(got, want), spec

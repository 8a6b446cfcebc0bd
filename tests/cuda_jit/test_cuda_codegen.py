"""CUDA C codegen: the ABI, literals, and every construct compiling with NVRTC for sm_90."""

from __future__ import annotations

import pytest
from support import construct_kernels as ck
from support import kernels
from support.nvrtc_compile import compile_sm90
from tenferro_host_cuda_jit._codegen import generate, kernel_abi
from tenferro_host_cuda_jit._codegen._numerics import c_literal

from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.kernel import ir

D = dtypes


def arrays(*types, ndim=1):
    return [K.ArrayDesc(t, ndim) for t in types]


S = K.ScalarDesc()

CASES = [
    (kernels.saxpy, [*arrays(D.float32, D.float32, D.float32), S], {}),
    (kernels.saxpy, [*arrays(D.float16, D.float16, D.float16), S], {}),
    (kernels.add, arrays(D.float64, D.float64, D.float64), {}),
    (kernels.transpose_2d, [K.ArrayDesc(D.float32, 1), K.ArrayDesc(D.float32, 2)], {}),
    (kernels.row_sums, [K.ArrayDesc(D.float64, 1), K.ArrayDesc(D.float64, 2)], {}),
    *[(ck.arith_float, arrays(t, t, t), {}) for t in (D.float32, D.float64, D.float16)],
    *[(ck.arith_int, arrays(t, t, t), {}) for t in (D.int32, D.int64, D.uint32)],
    (ck.u32_wrap, arrays(D.uint32), {}),
    *[(ck.power_and_math, arrays(t, t, t), {}) for t in (D.float32, D.float64, D.float16)],
    (ck.int_math, arrays(D.int32, D.int32, D.int32), {}),
    (ck.casts, arrays(D.float32, D.int32, D.uint32, D.float16, D.float64, D.bool_, D.float32), {}),
    (ck.generic_zero_and_literals, [*arrays(D.float32), K.ScalarDesc(D.int64)], {}),
    (ck.branches, arrays(D.int32, D.int32), {}),
    (ck.loops, arrays(D.int32, D.int32), {}),
    (ck.loop_counter_after_loop, [*arrays(D.uint32), S], {}),
    (ck.select_and_bools, arrays(D.float16, D.bool_, D.float16), {}),
    (ck.short_circuit, arrays(D.float32, D.float32), {}),
    (ck.grid_indices, arrays(D.uint32), {}),
    (ck.divide, arrays(D.int32, D.int32, D.int32), {}),
    (ck.scalar_kinds, [*arrays(D.float16, D.int64), S, S, S, S], {"scale": 0.25}),
]


@pytest.mark.parametrize(
    "kern,descs,consts", CASES, ids=[f"{k.__name__}-{d[0].dtype.name}" for k, d, _ in CASES]
)
def test_every_construct_compiles_for_sm90(kern, descs, consts):
    spec = kern.specialize(descs, consts, target="cuda", features=("sm_90",))
    generated = generate(spec)
    assert "#include" not in generated.source
    assert f'extern "C" __global__ void {generated.symbol}(' in generated.source
    assert compile_sm90(generated.source) > 0


def abi_of_a_vector(name: str) -> list[tuple[str, str, str, str, int | None, int]]:
    """The ABI rows of a 1-D array parameter: its pointer, then its metadata."""
    return [
        (f"p_{name}", "ptr", "data", name, None, 8),
        (f"m_offset_{name}", "u64", "offset", name, None, 8),
        (f"m_len_{name}", "u32", "len", name, None, 4),
        (f"m_shape0_{name}", "u32", "shape", name, 0, 4),
        (f"m_stride0_{name}", "u32", "stride", name, 0, 4),
    ]


def test_abi_layout_of_saxpy():
    spec = kernels.saxpy.specialize([*arrays(D.float32, D.float32, D.float32), S], {}, "cuda")
    abi = kernel_abi(spec)
    assert [(a.name, a.raw_type, a.role, a.param, a.axis, a.nbytes) for a in abi] == [
        *abi_of_a_vector("out"),
        *abi_of_a_vector("x"),
        *abi_of_a_vector("y"),
        ("p_a", "f32", "value", "a", None, 4),
        ("tf_count_x", "u32", "count", None, 0, 4),
        ("tf_count_y", "u32", "count", None, 1, 4),
        ("tf_count_z", "u32", "count", None, 2, 4),
    ]
    assert abi[0].c_decl == "float* p_out"  # written
    assert abi[5].c_decl == "const float* p_x"  # read only
    assert generate(spec).abi == abi


def test_abi_scalar_sizes_and_2d_metadata():
    spec = ck.scalar_kinds.specialize([*arrays(D.float16, D.int64), S, S, S, S], {}, "cuda")
    values = {
        a.param: (a.raw_type, a.c_decl, a.nbytes) for a in kernel_abi(spec) if a.role == "value"
    }
    assert values == {
        "flag": ("bool_", "unsigned char p_flag", 1),
        "h": ("f16", "unsigned short p_h", 2),
        "n": ("i64", "long long p_n", 8),
        "u": ("u32", "unsigned int p_u", 4),
    }
    spec = kernels.row_sums.specialize(
        [K.ArrayDesc(D.float64, 1), K.ArrayDesc(D.float64, 2)], {}, "cuda"
    )
    names = [a.name for a in kernel_abi(spec) if a.param == "m"]
    assert names == [
        "p_m",
        "m_offset_m",
        "m_len_m",
        "m_shape0_m",
        "m_shape1_m",
        "m_stride0_m",
        "m_stride1_m",
    ]


@pytest.mark.parametrize(
    "const,expected",
    [
        (ir.Const(-(2**31), type=D.int32), "(-2147483647 - 1)"),
        (ir.Const(-(2**63), type=D.int64), "(-9223372036854775807LL - 1)"),
        (ir.Const(7, type=D.uint32), "7u"),
        (ir.Const(-3, type=D.int64), "(-3LL)"),
        (ir.Const(True, type=D.bool_), "true"),
        (ir.Const(0.1, type=D.float64), "(0.1)"),
        (ir.Const(0.5, type=D.float32), "(0.5f)"),
        (ir.Const(float("inf"), type=D.float32), "__int_as_float(0x7f800000)"),
        (ir.Const(float("-inf"), type=D.float64), "__longlong_as_double(0xfff0000000000000LL)"),
        (ir.Const(float("nan"), type=D.float32), "__int_as_float(0x7fc00000)"),
        (ir.Const(1.5, type=D.float16), "tf_f2h((1.5f))"),
    ],
)
def test_literals_are_exact(const, expected):
    assert c_literal(const) == expected


def test_signed_arithmetic_wraps_in_unsigned():
    spec = ck.arith_int.specialize(arrays(D.int32, D.int32, D.int32), {}, "cuda")
    source = generate(spec).source
    assert "((int)((unsigned int)(" in source
    assert "((p_a + m_offset_a)[v_i] / (p_b + m_offset_b)[v_i])" in source  # C: truncates

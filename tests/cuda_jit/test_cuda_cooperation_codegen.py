"""CUDA C of the cooperation kernels: every one compiles for sm_90 with NVRTC, and NVRTC's
diagnostics name the Python file and line of the DSL statement (#line directives)."""

from __future__ import annotations

import pytest
from support import coop_kernels as ck
from support import coop_misuse as cm
from support import coop_remote
from support import unsupported_constructs as vr
from support.nvrtc_compile import _nvrtc, compile_sm90
from support.source_marks import marker_line
from tenferro_host_cuda import _nvrtc as nvrtc
from tenferro_host_cuda_jit._codegen import MAX_STATIC_SHARED_BYTES, generate

from tenferro_host import dtypes as D  # noqa: N812 - short like K for the DSL
from tenferro_host import kernel as K
from tenferro_host.errors import CompileError, UnsupportedError


def arrays(*types: D.DType, ndim: int = 1) -> list[K.ArrayDesc]:
    return [K.ArrayDesc(t, ndim) for t in types]


CASES = [
    (ck.block_sum, arrays(D.float32, D.float32), {}),
    (ck.block_sum, arrays(D.float64, D.float64), {"cube": 128}),
    (ck.column_sums, [K.ArrayDesc(D.float32, 1), K.ArrayDesc(D.float32, 2)], {}),
    (ck.histogram, arrays(D.uint32, D.uint32), {}),
    (ck.prefix_sum, arrays(D.float32, D.float32), {}),
    (ck.matmul, arrays(D.float32, D.float32, D.float32, ndim=2), {}),
    (ck.shared_atomics, arrays(D.float32, D.float32), {}),
    (ck.device_functions, arrays(D.float16, D.float16), {}),
    (ck.transpose_nd, arrays(D.float64, D.float64, ndim=2), {}),
    (ck.device_procedures, arrays(D.float64, D.float64, D.int32), {}),
    *[
        (ck.atomic_float, arrays(t, t, t), {"op": op, "slots": 3})
        for t in (D.float32, D.float64)
        for op in range(5)
    ],
    *[
        (ck.atomic_int, arrays(t, t, t), {"op": op, "slots": 3})
        for t in (D.int32, D.uint32, D.int64)
        for op in range(5)
    ],
]


@pytest.mark.parametrize(
    "kern,descs,consts",
    CASES,
    ids=[f"{k.__name__}-{d[0].dtype.name}-{sorted(c.items())}" for k, d, c in CASES],
)
def test_cooperation_kernels_compile_for_sm90(kern, descs, consts) -> None:
    spec = kern.specialize(descs, consts, target="cuda", features=("sm_90",))
    assert compile_sm90(generate(spec).source) > 0


def test_every_statement_carries_its_dsl_line() -> None:
    spec = ck.matmul.specialize(arrays(D.float32, D.float32, D.float32, ndim=2), {}, "cuda")
    source = generate(spec).source
    body_line = marker_line(ck.matmul, "K.sync_cube()")
    directive = f'#line {body_line} "{ck.__file__}"'
    assert directive in source
    assert source.split(directive)[1].lstrip().startswith("__syncthreads();")


def test_inlined_statements_carry_their_own_file() -> None:
    spec = cm.barrier_in_remote_function.specialize(arrays(D.float32), {}, "cuda")
    source = generate(spec).source
    line = marker_line(coop_remote, "# MARK remote-barrier")
    directive = f'#line {line} "{coop_remote.__file__}"'
    assert source.split(directive)[1].lstrip().startswith("__syncthreads();")
    assert f'"{cm.__file__}"' in source  # the kernel's own statements keep the kernel's file


def test_nvrtc_warnings_name_the_python_line() -> None:
    _nvrtc()  # skips where NVRTC is not installed
    spec = vr.pointless_comparison.specialize(arrays(D.uint32), {}, "cuda")
    image = nvrtc.compile_source(generate(spec).source, nvrtc.NvrtcOptions(arch="sm_90"))
    assert f"{vr.__file__}({marker_line(vr, '# MARK nvrtc-warning')}): warning" in image.log


def test_nvrtc_errors_name_the_python_line() -> None:
    """An error NVRTC finds in a statement (here injected into the generated C) is reported at
    that statement's Python line."""
    _nvrtc()
    spec = vr.pointless_comparison.specialize(arrays(D.uint32), {}, "cuda")
    source = generate(spec).source.replace("= 1u;", "= undeclared_name;")
    with pytest.raises(CompileError) as info:
        nvrtc.compile_source(source, nvrtc.NvrtcOptions(arch="sm_90"))
    assert f"{vr.__file__}({marker_line(vr, '# MARK nvrtc-warning') + 1}): error" in str(info.value)


def test_static_shared_memory_beyond_48k_is_unsupported() -> None:
    spec = ck.block_sum.specialize(arrays(D.float64, D.float64), {"cube": 8192}, "cuda")
    with pytest.raises(UnsupportedError, match=f"at most {MAX_STATIC_SHARED_BYTES} bytes"):
        generate(spec)

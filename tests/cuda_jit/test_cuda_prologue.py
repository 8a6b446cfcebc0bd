"""The generated kernel's prologue follows the launch's grid shape: the fold's divisions only
when the grid is folded; every shape compiles (NVRTC, sm_90). The GPU suite runs each shape
(tests/cuda_jit: 1-D, 3-D and folded counts of ``grid_indices``)."""

from __future__ import annotations

import pytest
from support import construct_kernels as ck
from support import kernels
from support.nvrtc_compile import compile_sm90
from tenferro_host_cuda_jit._codegen import (
    GRID_1D,
    GRID_DIRECT,
    GRID_FOLDED,
    generate,
    grid_shape,
)
from test_cuda_codegen import arrays

from tenferro_host import dtypes
from tenferro_host.provider._jit_session import fold_grid


@pytest.mark.parametrize(
    "count, dim, limit, shape",
    [
        ((4, 1, 1), (256, 1, 1), 65535, GRID_1D),
        ((4, 2, 1), (256, 1, 1), 65535, GRID_DIRECT),
        ((4, 1, 1), (16, 16, 1), 65535, GRID_DIRECT),
        ((61, 1, 1), (32, 1, 1), 4, GRID_FOLDED),
    ],
)
def test_grid_shape_of_a_launch(count, dim, limit, shape):
    assert grid_shape(count, fold_grid(count, (limit, limit, limit)), dim) == shape


def prologue(source: str) -> str:
    return source.split("{", 1)[1].split("unsigned int v_", 1)[0]


def test_only_a_folded_grid_divides():
    spec = kernels.add.specialize(
        arrays(dtypes.float32, dtypes.float32, dtypes.float32), {}, "cuda", ("sm_90",)
    )
    one_d = prologue(generate(spec, GRID_1D).source)
    assert "tf_absolute_pos = blockIdx.x * blockDim.x + threadIdx.x;" in one_d
    assert "%" not in one_d and "/" not in one_d and "gridDim" not in one_d
    direct = prologue(generate(spec, GRID_DIRECT).source)
    assert "%" not in direct and "gridDim" not in direct and "return" not in direct
    folded = prologue(generate(spec, GRID_FOLDED).source)
    assert "tf_cube % tf_count_x" in folded and "if (tf_cube >= tf_cube_count) return;" in folded
    assert generate(spec).source == generate(spec, GRID_FOLDED).source  # the safe default


@pytest.mark.parametrize("shape", [GRID_1D, GRID_DIRECT, GRID_FOLDED])
def test_every_prologue_compiles(shape):
    spec = ck.grid_indices.specialize(arrays(dtypes.uint32), {}, "cuda", ("sm_90",))
    assert compile_sm90(generate(spec, shape).source) > 0

"""docs/dsl-guide.md: its ```python blocks run, in order, as one module file (DSL kernels must
live in a file), on the CPU and — with only the backend name changed — on CUDA."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from support.cuda_jit_harness import cuda_runtime

DOC = Path(__file__).resolve().parents[2] / "docs" / "dsl-guide.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
BACKEND_LINE = 'rt = host.backend("cpu")'


def guide_module(tmp_path: Path, backend: str) -> Path:
    """The guide's code as one module, on ``backend``."""
    code = "\n".join(BLOCK.findall(DOC.read_text()))
    assert code.count(BACKEND_LINE) == 1
    path = tmp_path / "dsl_guide_blocks.py"
    path.write_text(code.replace(BACKEND_LINE, f'rt = host.backend("{backend}")'))
    return path


def test_the_guide_covers_its_kernels() -> None:
    code = "\n".join(BLOCK.findall(DOC.read_text()))
    for name in (
        "def saxpy",
        "def add",
        "def transpose_2d",
        "def row_sums",
        "DslError",
        "def transpose_nd",
        "def block_sum",
        "def column_sums",
        "def histogram",
        "def prefix_sum",
        "def matmul",
        "def matmul_4x4",
        "def neighbour_sums",
        "def gemm_f16_tiles",
        "def gemm_f16_mma_tiles",
        "@K.autotune",
        "@K.func",
        "K.SharedRaceError",
        "def warp_sum",
        "def softmax_rows",
        "K.DivergentSubgroupError",
    ):
        assert name in code, name


def test_the_guide_runs_on_cpu(tmp_path: Path) -> None:
    namespace = runpy.run_path(str(guide_module(tmp_path, "cpu")))
    assert namespace["rt"].kind == "cpu"


@pytest.mark.gpu
@pytest.mark.cuda
def test_the_guide_runs_on_cuda(tmp_path: Path) -> None:
    cuda_runtime()
    namespace = runpy.run_path(str(guide_module(tmp_path, "cuda")))
    assert namespace["rt"].kind == "cuda"

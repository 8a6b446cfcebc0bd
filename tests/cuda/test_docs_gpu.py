"""docs/custom-cuda-kernels.md: every ```python block runs, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cuda_support import cuda_runtime

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

DOC = Path(__file__).resolve().parents[2] / "docs" / "custom-cuda-kernels.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def test_doc_has_the_guide_flow():
    blocks = python_blocks()
    text = "\n".join(blocks)
    assert len(blocks) >= 6
    for name in (
        "compile_nvrtc",
        "load_ptx",
        "load_cubin",
        "tensor_mut",
        "launch(",
        "synchronize",
        "data_ptr_unsafe",
        "rs.stream",
        "resource(",
    ):
        assert name in text, name


def test_doc_blocks_run():
    cuda_runtime()
    namespace: dict[str, object] = {"__name__": "custom_cuda_kernels_doc"}
    for i, block in enumerate(python_blocks()):
        code = compile(block, f"{DOC.name}[python block {i}]", "exec")
        exec(code, namespace)  # noqa: S102 - the documentation's own code
    assert namespace["cuda"].stats()["synchronizations"] >= 1  # type: ignore[attr-defined]

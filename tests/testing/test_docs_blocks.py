"""Every code block of the contract, the cookbook and the README is run or compile-checked.

Python blocks of one page run in order as one module (DSL kernels need a source file); a block
after a ``<!-- needs a GPU -->`` line is compiled only. TOML is parsed, shell is checked with
``bash -n``, CUDA C is compiled with NVRTC. A block in any other language fails the test.
"""

from __future__ import annotations

import runpy
import subprocess
import tomllib
from pathlib import Path

import pytest
from support.doc_blocks import blocks

PAGES = ("docs/contract.md", "docs/cookbook.md", "README.md", "docs/distributed.md")
#: Pages whose Python blocks other tests run (each its own program): checked here, not run.
RUN_ELSEWHERE = ("docs/distributed.md",)


@pytest.mark.parametrize("page", PAGES)
def test_every_block_has_a_checked_language(page):
    found = blocks(page)
    assert found, f"{page} has no code blocks"
    unknown = [
        (b.line, b.language) for b in found if b.language not in ("python", "toml", "bash", "cuda")
    ]
    assert not unknown, f"{page}: blocks the suite cannot check: {unknown}"


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run_in_order(page, tmp_path):
    python = [b for b in blocks(page) if b.language == "python"]
    for b in python:
        compile(b.code, f"{page}:{b.line}", "exec")
    if page in RUN_ELSEWHERE:
        return
    module = tmp_path / (Path(page).stem.replace("-", "_") + "_blocks.py")
    module.write_text("\n".join(f"# {page}:{b.line}\n{b.code}" for b in python if not b.gpu_only))
    runpy.run_path(str(module), run_name="doc_blocks")


@pytest.mark.parametrize("page", PAGES)
def test_toml_and_shell_blocks_are_valid(page):
    for b in blocks(page):
        if b.language == "toml":
            tomllib.loads(b.code)
        elif b.language == "bash":
            proc = subprocess.run(["bash", "-n"], input=b.code, capture_output=True, text=True)
            assert proc.returncode == 0, f"{page}:{b.line}: {proc.stderr}"


def test_cuda_blocks_compile_with_nvrtc():
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (the cuda extra) is missing")
    from tenferro_host.cuda import raw

    cuda = [b for page in PAGES for b in blocks(page) if b.language == "cuda"]
    assert cuda
    for b in cuda:
        image = raw.nvrtc_compile(b.code, raw.NvrtcOptions(arch="compute_90"))
        assert b".entry" in image.data

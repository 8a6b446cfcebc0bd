"""Every Python snippet of docs/distributed.md runs as written, each a program of its own on a
fresh local ``ray.init()`` (CPU actors here), as the page promises. A snippet marked as needing a
GPU is compiled only (tests/testing/test_docs_blocks.py).

The programs inherit the tests' environment, which keeps Ray on loopback
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.doc_blocks import blocks

pytest.importorskip("ray", reason="needs Ray: the [ray] extra")

PAGE = "docs/distributed.md"
SNIPPETS = [b for b in blocks(PAGE) if b.language == "python" and not b.gpu_only]


def test_the_page_has_snippets_and_the_environment_keeps_ray_on_loopback():
    assert len(SNIPPETS) >= 4
    assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"line{b.line}" for b in SNIPPETS])
def test_a_snippet_runs_as_written(snippet, tmp_path):
    program = tmp_path / f"distributed_line{snippet.line}.py"
    program.write_text(snippet.code)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, f"{PAGE}:{snippet.line}\n{done.stdout}\n{done.stderr[-4000:]}"

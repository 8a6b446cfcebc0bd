"""docs/linalg.md: its python block runs on the CPU, and its table lists every linalg op."""

from __future__ import annotations

import re
from pathlib import Path

import tenferro_host as tf

DOC = Path(__file__).resolve().parents[2] / "docs" / "linalg.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_doc_blocks_run():
    blocks = BLOCK.findall(DOC.read_text())
    assert blocks
    namespace: dict[str, object] = {"__name__": "linalg_doc"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name}[python block {i}]", "exec"), namespace)  # noqa: S102


def test_doc_table_lists_every_op():
    text = DOC.read_text()
    ops = [name for name in tf.Host().registry.ops if name.startswith("linalg.")]
    assert len(ops) == 8
    missing = [name for name in ops if f"| `{name}` |" not in text]
    assert not missing, f"docs/linalg.md has no table row for {missing}"

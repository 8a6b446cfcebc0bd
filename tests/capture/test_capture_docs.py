"""docs/capture.md's example runs as written (on the CPU, as it says)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "capture.md"


def test_the_capture_page_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)  # noqa: S102 - the page's own code
    result = namespace["result"]
    assert result.download().tolist() == [float(i) + 2.0 for i in range(1024)]  # type: ignore[attr-defined]

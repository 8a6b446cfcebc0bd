"""The fenced code blocks of a documentation page, for the tests that run or check them.

A block right after a ``<!-- needs a GPU -->`` line is ``gpu_only``: compiled, not run, on a
machine without one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
GPU_ONLY = "<!-- needs a GPU -->"


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int
    gpu_only: bool


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``page`` (a path from the project's root), in order."""
    text = (ROOT / page).read_text()
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip().splitlines()
        line = text[: m.start()].count("\n") + 1
        gpu_only = bool(before) and before[-1].strip() == GPU_ONLY
        found.append(Block(m.group(1), m.group(2), line, gpu_only))
    return found


__all__ = ["GPU_ONLY", "ROOT", "Block", "blocks"]

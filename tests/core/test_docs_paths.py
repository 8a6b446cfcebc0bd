"""Every repository path the docs name in code spans exists: a page that points at a moved or
deleted file says something untrue (modules move; the sentence must follow)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md", ROOT / "bench" / "README.md"])
#: A code span that starts at a top-level folder of the repository: `tenferro_host/_host.py`.
PATH = re.compile(r"`((?:tenferro_host|plugins|bench|scripts|tests|examples|docs)/[\w./-]*)`")


def test_every_path_named_in_the_docs_exists():
    missing = [
        f"{page.relative_to(ROOT)}: {path}"
        for page in PAGES
        for path in PATH.findall(page.read_text())
        if not (ROOT / path.rstrip("/")).exists()
    ]
    assert not missing, "docs naming paths that do not exist:\n" + "\n".join(missing)

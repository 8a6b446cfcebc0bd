"""docs/architecture.svg is what scripts/architecture-diagram draws from the code now: the import
test's layers and the call path's files. A move or a new layer that makes the picture untrue
fails here until the picture is drawn again (``python3 scripts/architecture-diagram``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_diagram_is_the_one_the_code_draws():
    drawn = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "architecture-diagram"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    committed = (ROOT / "docs" / "architecture.svg").read_text()
    assert committed == drawn, "docs/architecture.svg is stale: run scripts/architecture-diagram"


def test_the_architecture_page_shows_the_diagram():
    assert "](architecture.svg)" in (ROOT / "docs" / "architecture.md").read_text()


def test_the_architecture_page_fits_one_reading():
    words = len((ROOT / "docs" / "architecture.md").read_text().split())
    assert words <= 700, f"docs/architecture.md has {words} words: 700 at most, one page"

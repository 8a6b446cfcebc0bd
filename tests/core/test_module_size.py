"""No Python module of the project is over 600 lines: a module that outgrows a page has more than
one job, and its next reader has to find which part is which (split it by concept)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("tenferro_host", "plugins", "tests", "bench", "examples", "scripts")
MOST = 600


def modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_the_walk_finds_the_project_modules():
    found = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"tenferro_host/provider/_capture.py", "tests/core/test_module_size.py"} <= found


def test_no_module_is_over_600_lines():
    over = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MOST
    ]
    assert not over, f"modules over {MOST} lines (split each by concept):\n" + "\n".join(over)

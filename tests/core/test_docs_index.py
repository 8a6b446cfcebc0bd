"""docs/index.md gives three ordered reading paths that together reach every page under docs/:
a page on no path is a page no reader is sent to."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
INDEX = DOCS / "index.md"
READERS = ("A user of ops", "An op author", "A backend or plugin author")


def reading_paths() -> dict[str, list[str]]:
    """Each ``### reader`` of the index's "Reading paths" section: its numbered links, in order."""
    section = INDEX.read_text().split("## Reading paths", 1)[1].split("\n## ", 1)[0]
    paths: dict[str, list[str]] = {}
    for block in section.split("\n### ")[1:]:
        reader, _, body = block.partition("\n")
        paths[reader.strip()] = re.findall(r"^\d+\. \[[^\]]+\]\(([^)#]+)\)", body, re.M)
    return paths


def test_the_index_has_a_path_per_reader_in_order():
    paths = reading_paths()
    assert tuple(paths) == READERS
    assert all(len(links) >= 3 for links in paths.values()), paths


def test_every_link_on_a_path_is_a_file():
    missing = [
        link
        for links in reading_paths().values()
        for link in links
        if not (DOCS / link).resolve().is_file()
    ]
    assert not missing, f"docs/index.md links to no file: {missing}"


def test_every_page_under_docs_is_on_a_path():
    linked = {(DOCS / link).resolve() for links in reading_paths().values() for link in links}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} - {INDEX.resolve()}
    unlisted = sorted(str(p.relative_to(DOCS)) for p in pages - linked)
    assert not unlisted, f"pages on no reading path of docs/index.md: {unlisted}"

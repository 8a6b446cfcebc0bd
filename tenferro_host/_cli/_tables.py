"""Rendering for people: tables of one line per row that fit the terminal, or ``--json``.

A cell never breaks a word (each column is at least as wide as its longest word). Long texts
(a reason, an error, a failed check's message) are not cells: the cell shows a mark such as
``[1]`` and the text is said once under the table, however many rows share it. ``--wide``
adds the columns that do not fit 80 characters and prints every row on one line. rich loads
only when something is rendered: ``--json`` never imports it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType

#: No column is held wider than this for its longest word (a path folds instead).
_MAX_WORD = 32
#: The console width of ``--wide``: every row on one line, however long.
_UNBOUNDED = 10_000


class Notes:
    """Texts said once under a table; a cell refers to one by its mark, ``[n]``."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}

    def mark(self, text: str) -> str:
        """The mark of ``text`` (the same text keeps its number)."""
        number = self._numbers.setdefault(text, len(self._numbers) + 1)
        return f"[{number}]"

    def render(self) -> list[RenderableType]:
        """The notes, one paragraph each, for under the table."""
        from rich.text import Text

        return [Text(f"[{n}] {text}") for text, n in self._numbers.items()]


def make_table(
    title: str,
    columns: Sequence[str],
    rows: list[list[Any]],
    *,
    notes: Notes | None = None,
    wide: bool = False,
) -> RenderableType:
    """A table whose cells wrap only between words (``wide``: never), its notes under it."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    cells = [["" if v is None else str(v) for v in row] for row in rows]
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        words = [w for row in cells for w in row[i].split()] + column.split()
        longest = min(max(map(len, words), default=1), _MAX_WORD)
        table.add_column(column, min_width=longest, no_wrap=wide)
    for row in cells:
        table.add_row(*(Text(v) for v in row))
    return Group(table, *notes.render()) if notes is not None else table


def emit(args: argparse.Namespace, data: Any, *renderables: RenderableType) -> None:
    """``data`` as JSON under ``--json``, else the tables and notes for people."""
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return
    from rich.console import Console

    wide = getattr(args, "wide", False)
    console = Console(soft_wrap=False, width=_UNBOUNDED if wide else None)
    for renderable in renderables:
        console.print(renderable)

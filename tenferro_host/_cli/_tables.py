"""Rendering for people: tables that share the terminal width, or ``--json`` instead."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

#: Flexible columns share the terminal width in these ratios; the others fit their content.
_RATIOS = {
    "reason": 3,
    "error": 3,
    "devices": 2,
    "capabilities": 2,
    "variants": 2,
    "kernels": 3,
    "message": 4,
}


def make_table(title: str, columns: Sequence[str], rows: list[list[Any]]) -> Table:
    table = Table(title=title, title_justify="left", expand=True)
    for column in columns:
        table.add_column(column, overflow="fold", ratio=_RATIOS.get(column))
    for row in rows:
        table.add_row(*(Text("" if v is None else str(v)) for v in row))
    return table


def emit(args: argparse.Namespace, data: Any, *tables: Table) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return
    console = Console(soft_wrap=False)
    for table in tables:
        console.print(table)

"""The SPI front is composed, documented and typed: ``tenferro_host.provider.__all__`` is the
union of its private modules' own ``__all__`` (and of the names loaded on first use), every name
resolves and is described in docs/provider-spi.md, and the hooks say what they return."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import tenferro_host.provider as spi
from tenferro_host.provider import OpReplay, Runtime

DOC = (Path(__file__).resolve().parents[2] / "docs" / "provider-spi.md").read_text()
HOST_NAMES = {"SPI_VERSION", "Memo", "MemoKind", "MemoStats", "memo", "memo_kinds", "memo_stats"}
HOST_NAMES |= {"ResourceCache"}
HOST_NAMES |= {"compact_strides", "is_compact", "numel", "span"}


def test_every_exported_name_resolves_once():
    assert len(spi.__all__) == len(set(spi.__all__))
    missing = [name for name in spi.__all__ if not hasattr(spi, name)]
    assert not missing


def shares() -> list[str]:
    """The private modules whose ``__all__`` the front star-imports."""
    tree = ast.parse(Path(spi.__file__).read_text())
    return [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.names[0].name == "*"
    ]


def test_the_front_is_its_modules_shares():
    assert len(shares()) >= 15
    eager = {
        name
        for module in shares()
        for name in importlib.import_module(f"{spi.__name__}.{module}").__all__
    }
    lazy = {name for names in spi.LAZY.values() for name in names}
    assert set(spi.__all__) == eager | lazy | HOST_NAMES


@pytest.mark.parametrize("module", sorted(spi.LAZY))
def test_a_lazy_name_is_in_its_modules_all(module):
    assert set(spi.LAZY[module]) <= set(importlib.import_module(f"{spi.__name__}.{module}").__all__)


@pytest.mark.parametrize("name", sorted(spi.__all__))
def test_every_exported_name_is_documented(name):
    assert re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", DOC), f"{name} not in provider-spi.md"


def test_op_replay_says_what_it_returns():
    assert Runtime.op_replay.__annotations__["return"] == f"{OpReplay.__name__} | None"

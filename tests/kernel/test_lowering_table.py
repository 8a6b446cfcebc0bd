"""The lowerer's one dispatch table: every key is an AST node class or the place and name of a
real K intrinsic's call, and no key is handled by two topic modules."""

from __future__ import annotations

import ast

import pytest

from tenferro_host.kernel import lang, lang_matrix
from tenferro_host.kernel._lowering import HANDLERS
from tenferro_host.kernel._lowering._lowerer import join_tables

PLACES = ("value", "statement", "assign")


def _intrinsic_names() -> set[str]:
    found = [*vars(lang).values(), *vars(lang_matrix).values()]
    return {v.name for v in found if isinstance(v, lang.Intrinsic)}


def test_every_key_is_a_node_class_or_an_intrinsic_call_place() -> None:
    names = _intrinsic_names()
    for key in HANDLERS:
        if isinstance(key, tuple):
            place, name = key
            assert place in PLACES and name in names, key
        else:
            assert issubclass(key, ast.AST), key


def test_every_statement_intrinsic_has_a_statement_handler() -> None:
    statements = {"sync_cube", "store4", *lang_matrix.MATRIX_STATEMENTS}
    assert [name for name in sorted(statements) if ("statement", name) not in HANDLERS] == []


def test_a_key_two_modules_handle_is_refused() -> None:
    with pytest.raises(TypeError, match=r"two lowering handlers for <class 'ast\.Name'>"):
        join_tables({ast.Name: print}, {ast.Name: print})

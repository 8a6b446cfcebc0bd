"""No import cycle in the source tree, the host and every plugin: a module is imported after
everything it needs. An import inside a function still counts (hoisted, it must not close a
cycle: a function-level import is for a cost put off, never for a cycle dodged); an import for
annotations only (``if TYPE_CHECKING:``) does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.import_graph import Import, cycles, graph, imports, known_modules, target


@pytest.mark.parametrize("with_function_imports", [False, True], ids=["module", "hoisted"])
def test_no_import_cycle(with_function_imports):
    found = cycles(graph(with_function_imports=with_function_imports))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_cycle_is_found():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]


def test_an_import_names_the_submodule_it_reaches(tmp_path: Path):
    modules = known_modules()
    assert "tenferro_host.provider._ccall" in modules  # an extension module (its .c source)
    assert (
        target(Import(1, "tenferro_host.provider", "_ccall", False, True), modules)
        == "tenferro_host.provider._ccall"
    )
    assert target(Import(1, "tenferro_host.provider", "Runtime", False, False), modules) == (
        "tenferro_host.provider"
    )
    assert target(Import(1, "numpy", None, False, False), modules) is None


def test_imports_are_told_apart_by_where_they_stand():
    found = {
        (i.module, i.name): (i.typing_only, i.in_function)
        for i in imports(Path(__file__).resolve().parents[2] / "tenferro_host" / "tensor.py")
    }
    assert found[("tenferro_host.provider._runtime", "Runtime")] == (True, False)
    assert found[("tenferro_host.dtypes", "DType")] == (False, False)

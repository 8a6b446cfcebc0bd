"""The source tree's import statements as a graph: the layer, plugin and cycle tests read it.

A module's imports are resolved to absolute names (relative ones against its package); an
import under ``if TYPE_CHECKING:`` is for annotations only and is kept apart, as is one made
inside a function (run when called, yet still a dependency: hoisted, it must not close a cycle).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "tenferro_host"
#: Every package of the source tree: the host and each plugin.
PLUGINS = sorted(
    p for p in (ROOT / "plugins").iterdir() if p.is_dir() and p.name.startswith("tenferro_host")
)
#: The example op package, a plugin as any third party writes one.
EXAMPLE = ROOT / "examples" / "ext_add_kernel" / "ext_add_kernel"
PACKAGES = [HOST, *PLUGINS, EXAMPLE]


@dataclass(frozen=True)
class Import:
    """One name an import statement brings: ``module`` (absolute), or ``name`` from it."""

    line: int
    module: str
    name: str | None
    typing_only: bool  # under ``if TYPE_CHECKING:``
    in_function: bool


def module_name(path: Path) -> str:
    """The dotted name of the source file ``path`` (a package's ``__init__.py``: the package;
    a file outside the tree's packages: a top-level module)."""
    package = next((p for p in PACKAGES if path.is_relative_to(p)), None)
    parts = list(path.relative_to(path.parent if package is None else package.parent).parts)
    parts[-1] = parts[-1].removesuffix(".py")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files(package: Path) -> list[Path]:
    """The Python modules of ``package`` (the scaffold's templates are data, not modules)."""
    return sorted(p for p in package.rglob("*.py") if "template" not in p.parts)


def imports(path: Path) -> list[Import]:
    """Every import statement of ``path``, one :class:`Import` per name it binds."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, typing_only: bool, in_function: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(
                Import(node.lineno, a.name, None, typing_only, in_function) for a in node.names
            )
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            found.extend(
                Import(node.lineno, module, a.name, typing_only, in_function) for a in node.names
            )
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True, in_function)
            for child in node.orelse:
                visit(child, typing_only, in_function)
        else:
            nested = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for child in ast.iter_child_nodes(node):
                visit(child, typing_only, nested)

    visit(ast.parse(path.read_text(), str(path)), False, False)
    return found


@functools.cache
def known_modules() -> dict[str, Path]:
    """Every module of the tree by name, extension modules (a ``.c`` beside them) included."""
    found = {module_name(p): p for package in PACKAGES for p in source_files(package)}
    for package in PACKAGES:
        for source in package.rglob("_*.c"):
            found[module_name(source.with_suffix(".py"))] = source
    return found


def target(imp: Import, modules: dict[str, Path]) -> str | None:
    """The module of the tree that ``imp`` depends on (``from p import m``: the submodule ``m``
    where there is one, else the package ``p``), or None for one outside the tree."""
    if imp.name is not None and f"{imp.module}.{imp.name}" in modules:
        return f"{imp.module}.{imp.name}"
    return imp.module if imp.module in modules else None


def graph(*, with_function_imports: bool) -> dict[str, set[str]]:
    """Each module's run-time dependencies in the tree (type-only imports left out)."""
    modules = known_modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        if path.suffix != ".py":
            continue
        for imp in imports(path):
            if imp.typing_only or (imp.in_function and not with_function_imports):
                continue
            found = target(imp, modules)
            if found is not None and found != name:
                edges[name].add(found)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found

"""Imports point down (docs/architecture.md): checked on the AST of every host module.

The layers, bottom up: the base modules (errors, dtypes, tensor ...), the DSL's language (kernel/
without its sessions), the provider SPI (provider/), the host and its CPU backend, the kit, the
benchmarks and the CLI; the plugins sit on top and the host never imports one. The backend
facades (tenferro_host.cuda ...) resolve a plugin's public names by name, lazily: that is their
job, and they import no plugin module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HOST = Path(__file__).resolve().parents[2] / "tenferro_host"
#: What provider/ may import from the rest of the host: the base and the DSL's language (types).
BELOW_PROVIDER = {
    "tenferro_host.capability",
    "tenferro_host.dtypes",
    "tenferro_host.errors",
    "tenferro_host.facade",
    "tenferro_host.identity",
    "tenferro_host._memo",
    "tenferro_host._env",
    "tenferro_host.layout",
    "tenferro_host.ops",
    "tenferro_host.tensor",
    "tenferro_host.kernel._autotune",
    "tenferro_host.kernel._kernel",
    "tenferro_host.kernel.ir",
    "tenferro_host.kernel.lang",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(HOST.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether the dotted ``name`` is a module or package of the host (not a name in one)."""
    path = HOST.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, TYPE_CHECKING blocks included;
    ``from package import name`` also counts as importing ``package.name`` (a host module)."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [
                (node.lineno, f"{module}.{a.name}")
                for a in node.names
                if not module.startswith("tenferro_host") or is_module(f"{module}.{a.name}")
            ]
    return found


#: The host's layers, bottom up: a module's layer is that of its longest matching prefix.
LAYERS = [
    (
        "base",
        (
            "errors",
            "dtypes",
            "identity",
            "layout",
            "capability",
            "ops",
            "tensor",
            "facade",
            "_memo",
            "_shapes",
            "_rules",
            "_env",
        ),
    ),
    (
        "dsl",
        (
            "kernel",
            "kernel._kernel",
            "kernel._autotune",
            "kernel.lang",
            "kernel._frontend",
            "kernel.ir",
        ),
    ),
    ("spi", ("provider",)),
    (
        "host",
        (
            "",
            "_host",
            "_loader",
            "_op_handle",
            "_cpu",
            "compile_only",
            "cpu",
            "cuda",
            "webgpu",
        ),
    ),
    (
        "tools",
        ("testing", "benchmarks", "_cli", "scaffold", "__main__", "interop", "distributed"),
    ),
]


def layer_of(module: str) -> int:
    """The index in LAYERS of host module ``module`` (``tenferro_host.x.y``)."""
    rest = module.removeprefix("tenferro_host").removeprefix(".")
    best = (-1, -1)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if rest == prefix or rest.startswith(prefix + ".") or (prefix == "" and rest == ""):
                best = max(best, (len(prefix), index))
    assert best[1] >= 0, f"{module} has no layer: add it to LAYERS"
    return best[1]


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    """:func:`imports` without those under ``if TYPE_CHECKING:`` (annotations only)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        n.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for n in ast.walk(stmt)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    return [(line, m) for line, m in imports(path) if line not in typing_only]


def test_every_host_module_imports_only_its_layer_or_below():
    bad = []
    for path in host_modules():
        own = layer_of(module_name(path))
        for line, module in runtime_imports(path):
            if module == "tenferro_host" or not module.startswith("tenferro_host."):
                continue  # the package itself (``from .. import layout`` names its member)
            if layer_of(module) > own:
                bad.append(
                    f"{path.relative_to(HOST.parent)}:{line}: {LAYERS[own][0]} imports "
                    f"{module} ({LAYERS[layer_of(module)][0]})"
                )
    assert not bad, "imports pointing up:\n" + "\n".join(bad)


def host_modules() -> list[Path]:
    return sorted(p for p in HOST.rglob("*.py") if "template" not in p.parts)


def test_no_host_module_imports_a_plugin():
    bad = [
        f"{path.relative_to(HOST.parent)}:{line}: {module}"
        for path in host_modules()
        for line, module in imports(path)
        if module.split(".")[0].startswith("tenferro_host_")
    ]
    assert not bad, "host modules importing a plugin package:\n" + "\n".join(bad)


def allowed_from_provider(module: str) -> bool:
    if not module.startswith("tenferro_host") or module.startswith("tenferro_host.provider"):
        return not module.split(".")[0].startswith("tenferro_host_")
    return module in BELOW_PROVIDER or any(module.startswith(m + ".") for m in BELOW_PROVIDER)


def test_provider_imports_nothing_above_it():
    bad = []
    for path in sorted((HOST / "provider").glob("*.py")):
        for line, module in imports(path):
            # ``from .. import layout`` names the package tenferro_host itself: only its member
            if module == "tenferro_host":
                continue
            if not allowed_from_provider(module):
                bad.append(f"{path.relative_to(HOST.parent)}:{line}: {module}")
    assert not bad, "provider/ importing from above the SPI:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "ok"),
    [
        ("tenferro_host._host", False),
        ("tenferro_host.provider._jit_session", True),
        ("tenferro_host.testing.recording", False),
        ("tenferro_host_cuda", False),
        ("tenferro_host.errors.ValidationError", True),
        ("tenferro_host.provider._session", True),
        ("numpy", True),
    ],
)
def test_the_provider_rule(module, ok):
    assert allowed_from_provider(module) is ok


def test_imports_resolves_relative_imports():
    sample = HOST / "provider" / "_registry.py"
    found = {m for _, m in imports(sample)}
    assert "tenferro_host.errors" in found and "tenferro_host.provider._compile_targets" in found


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("tenferro_host.errors", "base"),
        ("tenferro_host.kernel", "dsl"),
        ("tenferro_host.kernel.ir", "dsl"),
        ("tenferro_host.provider._jit_session", "spi"),
        ("tenferro_host.provider._registry", "spi"),
        ("tenferro_host", "host"),
        ("tenferro_host._cpu._runtime", "host"),
        ("tenferro_host._cpu._interpreter._machine", "host"),
        ("tenferro_host.compile_only", "host"),
        ("tenferro_host.provider._autotuning", "spi"),
        ("tenferro_host.testing.conformance", "tools"),
    ],
)
def test_layer_of(module, layer):
    assert LAYERS[layer_of(module)][0] == layer


def test_an_annotation_only_import_is_not_a_runtime_import():
    tensor = HOST / "tensor.py"
    assert "tenferro_host.provider._runtime" in {m for _, m in imports(tensor)}
    assert "tenferro_host.provider._runtime" not in {m for _, m in runtime_imports(tensor)}

"""Imports point down (docs/architecture.md): checked on the AST of every host module.

The layers, bottom up: the base modules (errors, dtypes, tensor ...), the DSL's language (kernel/
without its sessions), the provider SPI (provider/), the host and its CPU backend, the kit, the
benchmarks and the CLI; the plugins sit on top and the host never imports one. The backend
facades (tenferro_host.cuda ...) resolve a plugin's public names by name, lazily: that is their
job, and they import no plugin module.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.import_graph import HOST, known_modules, module_name, source_files
from support.import_graph import imports as statements

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


def imports(path: Path, *, typing_too: bool = True) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, those under ``if TYPE_CHECKING:``
    unless ``typing_too`` is false; ``from package import name`` also counts as importing
    ``package.name`` where that is a module of the tree."""
    modules = known_modules()
    found = []
    for imp in statements(path):
        if imp.typing_only and not typing_too:
            continue
        found.append((imp.line, imp.module))
        if imp.name is not None and f"{imp.module}.{imp.name}" in modules:
            found.append((imp.line, f"{imp.module}.{imp.name}"))
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
    return imports(path, typing_too=False)


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
    return source_files(HOST)


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

"""Built-in plugins get no back door: they import only the public API and the provider SPI.

A built-in provider is registered and built exactly like a third-party one (docs/contract.md).
The allowed set below is the documented surface (docs/provider-spi.md); host internals
(host, plugins, cpu_runtime, cli, the DSL front-end and interpreter) are not in it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"

PUBLIC = {
    "tenferro_host",
    "tenferro_host.capability",
    "tenferro_host.cpu",
    "tenferro_host.cuda",
    "tenferro_host.dtypes",
    "tenferro_host.errors",
    "tenferro_host.identity",
    "tenferro_host.kernel",
    "tenferro_host.layout",
    "tenferro_host.ops",
    "tenferro_host.tensor",
    "tenferro_host.webgpu",
}
SPI = {
    "tenferro_host.provider.hookspecs",
    "tenferro_host.kernel.ir",
    "tenferro_host.provider",
    "tenferro_host.provider.registry",
}
#: Public raw seam the DSL's CUDA provider builds on (the same module under both names).
RAW_SEAM = {"tenferro_host.cuda.raw", "tenferro_host_cuda.raw"}
THIRD_PARTY = {"numpy", "pluggy", "cuda", "wgpu", "cupy"}


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the plugin's own package
                found.append((node.lineno, package))
            else:
                assert node.module is not None
                found.append((node.lineno, node.module))
                # `from tenferro_host.cuda import raw` imports the module tenferro_host.cuda.raw
                found += [
                    (node.lineno, f"{node.module}.{a.name}")
                    for a in node.names
                    if node.module == "tenferro_host.cuda" and a.name == "raw"
                ]
    return found


def allowed(module: str, package: str) -> bool:
    top = module.split(".")[0]
    if top == package or module in PUBLIC or module in RAW_SEAM:
        return True
    if any(module == s or module.startswith(s + ".") for s in SPI):
        return True
    if top.startswith("tenferro_host"):
        return False
    return top in THIRD_PARTY or top in sys.stdlib_module_names


@pytest.mark.parametrize(
    "package",
    sorted(p.name for p in PLUGINS.iterdir() if p.is_dir() and p.name.startswith("tenferro_host_")),
)
def test_plugin_imports_only_public_api_and_spi(package):
    bad = []
    for path in sorted((PLUGINS / package).rglob("*.py")):
        for lineno, module in imported_modules(path, package):
            if not allowed(module, package):
                bad.append(f"{path.relative_to(PLUGINS)}:{lineno}: {module}")
    assert not bad, "private imports in a built-in plugin:\n" + "\n".join(bad)


def test_the_rule_catches_a_private_import(tmp_path):
    sample = tmp_path / "mod.py"
    sample.write_text("from tenferro_host._host import Host\nfrom tenferro_host import Tensor\n")
    found = imported_modules(sample, "tenferro_host_sample")
    assert [allowed(m, "tenferro_host_sample") for _, m in found] == [False, True]


def test_linalg_package_loads_vendor_libraries_only_inside_calls():
    """The linalg op package (checked by the rule above like every built-in) reaches cuBLAS and
    cuSOLVER through CuPy, an optional dependency: no module imports cupy or cuda at module
    level, so registering its ops loads no GPU library and works without CuPy."""
    package = PLUGINS / "tenferro_host_linalg"
    assert package.is_dir()
    eager = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            eager += [
                f"{path.name}:{node.lineno}: {n}"
                for n in names
                if n.split(".")[0] in ("cupy", "cuda")
            ]
    assert not eager, "module-level GPU imports in tenferro_host_linalg:\n" + "\n".join(eager)

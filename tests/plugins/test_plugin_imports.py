"""Plugins get no back door: they import the host only through its public fronts.

A built-in provider is registered and built exactly like a third-party one (docs/contract.md), so
the rule is one sentence (docs/provider-spi.md): a plugin imports from the host only the names
that ``tenferro_host``, ``tenferro_host.provider`` (the SPI) and ``tenferro_host.kernel`` (the DSL)
export, the DSL's typed IR ``tenferro_host.kernel.ir`` (the codegens' SPI module) and the backend
facades (``tenferro_host.cuda.raw`` ...) — never a module or a name that is private by its
``__all__`` or its leading underscore. Another plugin is reached only through its public modules.
The built-in CPU backend (``tenferro_host._cpu``) is held to the same rule: it lives in the host's
package, yet reaches the host only through the same fronts.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from support.import_graph import imports

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
#: The host modules a plugin may import from: every one exports its names in ``__all__``, except
#: the IR (its public names are those without a leading underscore).
FRONTS = (
    "tenferro_host",
    "tenferro_host.provider",
    "tenferro_host.kernel",
    "tenferro_host.kernel.ir",
    "tenferro_host.cpu",
    "tenferro_host.cuda",
    "tenferro_host.webgpu",
)
CPU_BACKEND = ROOT / "tenferro_host" / "_cpu"
PACKAGES = sorted(
    [p for p in PLUGINS.iterdir() if p.is_dir() and p.name.startswith("tenferro_host_")]
    + [ROOT / "examples" / "ext_add_kernel" / "ext_add_kernel", CPU_BACKEND]
)


def package_name(package: Path) -> str:
    return "tenferro_host._cpu" if package == CPU_BACKEND else package.name


def host_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import of a ``tenferro_host*`` module, relative
    ones resolved and type-only ones included."""
    return [
        (i.line, i.module, i.name)
        for i in imports(path)
        if i.module.split(".")[0].startswith("tenferro_host")
    ]


def public_names(module: str) -> set[str]:
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    return {*names, "__version__"} if module == "tenferro_host" else set(names)


def violation(module: str, name: str | None, package: str) -> str | None:
    """Why importing ``name`` from ``module`` breaks the rule, or None."""
    if module == package or module.startswith(package + "."):
        return None  # the plugin's own package (written absolutely in doctests)
    top = module.split(".")[0]
    if top != "tenferro_host":  # another plugin: its public modules only
        private = [part for part in module.split(".") if part.startswith("_")]
        if name is not None and name.startswith("_"):
            private.append(name)
        return f"private part {private} of another plugin" if private else None
    if module not in FRONTS:
        return f"{module} is not a public front"
    if name is not None and f"{module}.{name}" in FRONTS:
        return None  # a front itself: ``from tenferro_host import kernel as K``
    if name is not None and name not in public_names(module):
        return f"{name} is not exported by {module}"
    return None


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_plugin_imports_only_public_fronts(package):
    bad = []
    for path in sorted(package.rglob("*.py")):
        for lineno, module, name in host_imports(path):
            why = violation(module, name, package_name(package))
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {why}")
    assert not bad, "imports past the host's public fronts:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("source", "ok"),
    [
        ("from tenferro_host._host import Host", False),
        ("from tenferro_host.errors import ShapeError", False),
        ("from tenferro_host.provider._registry import RegistrationView", False),
        ("from tenferro_host.provider import _LAZY", False),
        ("from tenferro_host_cuda._driver import drv", False),
        ("import tenferro_host.provider._session", False),
        ("from tenferro_host import Tensor", True),
        ("from tenferro_host.provider import RegistrationView, hookimpl", True),
        ("from tenferro_host.kernel.ir import Binary", True),
        ("from tenferro_host.cuda import raw", True),
    ],
)
def test_the_rule_catches_a_private_import(tmp_path, source, ok):
    sample = tmp_path / "mod.py"
    sample.write_text(source + "\n")
    found = host_imports(sample)
    assert found
    assert all(violation(m, n, "tenferro_host_sample") is None for _, m, n in found) is ok


def test_linalg_package_loads_vendor_libraries_only_inside_calls():
    """The linalg op package (checked by the rule above like every built-in) reaches cuBLAS and
    cuSOLVER through CuPy, an optional dependency: no module imports cupy or cuda at module
    level, so registering its ops loads no GPU library and works without CuPy."""
    package = PLUGINS / "tenferro_host_linalg"
    assert package.is_dir()
    eager = [
        f"{path.name}:{i.line}: {i.module}"
        for path in sorted(package.rglob("*.py"))
        for i in imports(path)
        if not (i.in_function or i.typing_only) and i.module.split(".")[0] in ("cupy", "cuda")
    ]
    assert not eager, "module-level GPU imports in tenferro_host_linalg:\n" + "\n".join(eager)

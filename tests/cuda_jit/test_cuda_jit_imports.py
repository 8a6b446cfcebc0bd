"""The CUDA JIT provider: built only on the public raw seam, registered by its entry point,
and importing it (and making a JIT session's module ready) loads no CUDA library."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tenferro_host_cuda_jit

import tenferro_host as tf

PACKAGE = Path(tenferro_host_cuda_jit.__file__).parent
#: Modules of tenferro_host_cuda the provider may import: the public raw seam only.
RAW_SEAM = {"tenferro_host_cuda.raw"}
#: Third-party top-level packages it may import.
THIRD_PARTY = {"numpy"}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute name) of every import in ``path``; ``from x import y`` reads as ``x.y``,
    so ``from tenferro_host_cuda import raw`` is the raw seam and ``... import CudaRuntime`` not."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside this package (or its compiler subpackage)
                base = "tenferro_host_cuda_jit" + (f".{node.module}" if node.module else "")
            else:
                base = node.module or ""
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def allowed(module: str) -> bool:
    """Public tenferro_host API/SPI, the raw seam, this package, the stdlib, numpy."""
    top, *rest = module.split(".")
    if top == "tenferro_host":
        return not any(part.startswith("_") for part in rest)
    if top == "tenferro_host_cuda":
        return module in RAW_SEAM or any(module.startswith(m + ".") for m in RAW_SEAM)
    if top == "tenferro_host_cuda_jit":
        return True
    return top in sys.stdlib_module_names or top in THIRD_PARTY


def test_the_provider_imports_only_public_api_and_the_raw_seam() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    names = {f.relative_to(PACKAGE).as_posix() for f in files}
    assert names >= {"__init__.py", "_jit.py", "_codegen/__init__.py", "_codegen/_cuda_c.py"}
    bad = [
        f"{f.relative_to(PACKAGE)}:{line}: {module}"
        for f in files
        for line, module in imported_modules(f)
        if not allowed(module)
    ]
    assert bad == []


@pytest.mark.parametrize(
    "module,ok",
    [
        ("tenferro_host.provider", True),
        ("tenferro_host.provider._jit_session", False),
        ("tenferro_host.cuda.raw", True),
        ("tenferro_host_cuda.raw.u32", True),
        ("tenferro_host._private", False),
        ("tenferro_host_cuda.CudaRuntime", False),
        ("tenferro_host_cuda._runtime", False),
        ("tenferro_host_cuda._driver.drv", False),
        ("cuda.bindings.driver", False),
        ("cupy", False),
    ],
)
def test_the_import_rule_itself(module: str, ok: bool) -> None:
    assert allowed(module) is ok


def test_registered_as_the_cuda_jit_provider() -> None:
    host = tf.Host()
    assert host.registry.jit_factory("cuda") is tenferro_host_cuda_jit.jit_session
    records = {r.name: r for r in host.plugins.records}
    assert records["cuda_jit"].status == "loaded"
    assert host.variants_by_backend("ext_add_kernel.add").get("cuda") == "cuda-raw"


SCRIPT = """
import json, sys
import tenferro_host as tf
import tenferro_host_cuda_jit
from tenferro_host_cuda_jit import _jit as session
host = tf.Host()
factory = host.registry.jit_factory("cuda")
modules = sorted(m for m in sys.modules if m.split(".")[0] in ("cuda", "cupy"))
maps = open("/proc/self/maps").read()
libs = sorted(lib for lib in ("libcuda.", "libcudart", "libnvrtc") if lib in maps)
print(json.dumps({"factory": factory is tenferro_host_cuda_jit.jit_session,
                  "modules": modules, "libs": libs}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_importing_the_provider_loads_no_cuda_library() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"factory": True, "modules": [], "libs": []}

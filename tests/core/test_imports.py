"""Importing tenferro_host, its facades, its CLI and its test kit loads no GPU library."""

from __future__ import annotations

GPU_PREFIXES = ("cupy", "cuda", "wgpu", "torch")

PROBE = """
import json, sys
import tenferro_host, tenferro_host.cuda, tenferro_host.webgpu, tenferro_host.cpu
import tenferro_host._cli, tenferro_host.testing, tenferro_host.testing.pytest_plugin
import tenferro_host.provider
print(json.dumps(sorted(sys.modules)))
"""


def is_gpu_module(name: str) -> bool:
    if name.startswith("tenferro_host"):  # our own facades (tenferro_host.cuda) are fine
        return False
    return any(name == p or name.startswith((p + ".", p + "_")) for p in GPU_PREFIXES)


def test_is_gpu_module():
    assert is_gpu_module("cuda") and is_gpu_module("cuda.bindings") and is_gpu_module("cupy")
    assert is_gpu_module("wgpu.backends") and is_gpu_module("torch")
    assert is_gpu_module("cupy_backends")
    assert not is_gpu_module("tenferro_host.cuda") and not is_gpu_module("numpy")


def test_imports_load_no_gpu_library(subproc):
    modules = subproc.json(PROBE)
    assert "tenferro_host.cuda" in modules  # the probe really imported the facade
    assert [m for m in modules if is_gpu_module(m)] == []


def test_python_dash_m_help(subproc):
    proc = subproc.cli("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("caps", "plugins", "ops", "run"):
        assert command in proc.stdout

"""The base configuration (no extras) works on its own: host, CLI, CPU backend and DSL; the
distributed package imports and says which extra a pool needs.

``scripts/test`` creates ``.venv-base`` from uv.lock without extras before pytest runs; GPU
backends must be listed unavailable with a reason naming the extra, and no GPU library loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE_PYTHON = ROOT / ".venv-base" / "bin" / "python"

SCRIPT = r"""
import json, sys
import numpy as np
import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host._cli import caps_report

@K.kernel
def twice(out: K.Array[K.F], x: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * 2.0

host = tf.Host()
cpu = host.backend(host.default_backend())
x = cpu.upload(np.arange(5, dtype=np.float32))
with cpu.session() as s, s.exec_session().jit("base.twice") as js:
    out = js.alloc_output(tf.float32, (5,))
    js.launch(twice, 1, 8, out, x)
from tenferro_host.distributed import HostPool
try:
    HostPool.start("cpu")
except tf.UnsupportedError as exc:
    ray_error = exc.message
gpu_modules = sorted(m for m in sys.modules if m.split(".")[0] in ("cuda", "cupy", "wgpu", "torch"))
print(json.dumps({"caps": caps_report(host), "out": out.download().tolist(),
                  "gpu_modules": gpu_modules, "ray_error": ray_error}))
"""


def test_base_configuration_without_extras(tmp_path, subproc):
    if not BASE_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail("CI runs scripts/test, which creates .venv-base: it is missing")
        pytest.skip("no .venv-base: scripts/test (scripts/setup-base) creates it")
    (tmp_path / "base_check.py").write_text(SCRIPT)  # the DSL reads kernels from files
    found = subproc.json_of([str(BASE_PYTHON), "base_check.py"], cwd=tmp_path)
    assert found["out"] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert found["gpu_modules"] == []
    assert "tenferro-host[ray]" in found["ray_error"]
    backends = {b["kind"]: b for b in found["caps"]["backends"]}
    assert backends["cpu"]["available"]
    assert not backends["cuda"]["available"] and "tenferro-host[cuda]" in backends["cuda"]["reason"]
    assert not backends["webgpu"]["available"]
    assert "tenferro-host[webgpu]" in backends["webgpu"]["reason"]
    assert all(p["status"] == "loaded" for p in found["caps"]["plugins"])

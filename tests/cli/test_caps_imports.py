"""What ``caps --json`` imports (never how long it takes): the tables' library (rich), the
benchmarks and the test kit are for other commands; with the probe cache warm, no backend
library is asked again either — wgpu is not imported, and the JSON says which devices the cache
described."""

from __future__ import annotations

from typing import Any

PROBE = """
import contextlib, io, json, sys
from tenferro_host._cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["caps", "--json"])
caps = json.loads(out.getvalue())
print(json.dumps({"code": code, "caps": caps, "modules": sorted(sys.modules)}))
"""
NOT_FOR_CAPS = ("rich", "tenferro_host.benchmarks", "tenferro_host.testing")


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_caps_json_imports_no_table_library_nor_test_kit(subproc, tmp_path):
    env = {"TENFERRO_PROBE_CACHE_DIR": str(tmp_path / "probes")}
    cold = subproc.json(PROBE, **env)
    assert cold["code"] == 0 and _loaded(cold["modules"], NOT_FOR_CAPS) == []
    warm = subproc.json(PROBE, **env)
    assert warm["code"] == 0 and _loaded(warm["modules"], NOT_FOR_CAPS) == []
    assert _loaded(warm["modules"], ("wgpu",)) == []  # the warm cache answered for WebGPU
    cold_devices = {b["name"]: b["devices"] for b in cold["caps"]["backends"]}
    for backend in warm["caps"]["backends"]:
        if backend["name"] == "webgpu" and backend["available"]:
            assert all(d.get("probe") == "cache" for d in backend["devices"])
            assert all(d.get("probe") != "cache" for d in cold_devices["webgpu"])
    # the same document, but for where each figure came from
    assert _without_probe(warm["caps"]) == _without_probe(cold["caps"])


def _without_probe(caps: dict[str, Any]) -> dict[str, Any]:
    backends = [
        dict(b, devices=[{k: v for k, v in d.items() if k != "probe"} for d in b["devices"]])
        for b in caps["backends"]
    ]
    return dict(caps, backends=backends)


def test_caps_tables_still_render(subproc):
    proc = subproc.cli("caps")
    assert proc.returncode == 0, proc.stderr
    assert "Backends" in proc.stdout and "Operations" in proc.stdout

"""Which plugins load is the user's to narrow, before any plugin code runs: by name (an
allow-list, a block-list) or by origin (only tenferro-host's own plugins); and where each
plugin's code comes from is shown without importing it.

The example op package ``ext-add-kernel`` (installed by ``scripts/setup``) is the third-party
plugin here; each case runs in a fresh process, where no plugin module was imported before.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest
from support.install_kind import install_kind
from support.subprocesses import Subprocess

import tenferro_host as tf
from tenferro_host._loader import PluginRecord, module_file, plugin_source

PROBE = """
import json, sys
import tenferro_host as tf
host = tf.Host(**json.loads(sys.argv[1]))
records = {r.name: [r.status, r.reason] for r in host.plugins.records}
plugin_modules = sorted(
    m for m in sys.modules if m.split(".")[0] in
    ("ext_add_kernel", "tenferro_host_cuda", "tenferro_host_cuda_jit", "tenferro_host_webgpu",
     "tenferro_host_rocm", "tenferro_host_linalg")
    and "." not in m
)
print(json.dumps({"records": records, "ops": sorted(host.registry.ops),
                  "imported": plugin_modules}))
"""


def probe(env: dict[str, str] | None = None, **host: Any) -> dict[str, Any]:
    """A fresh host's plugin records, ops and imported plugin modules, ``Host(**host)`` under
    ``env`` (and no other TENFERRO_* setting)."""
    argv = [sys.executable, "-c", PROBE, json.dumps(host)]
    result: dict[str, Any] = Subprocess().json_of(argv, **(env or {}))
    return result


def loaded(result: dict[str, Any]) -> set[str]:
    return {name for name, (status, _) in result["records"].items() if status == "loaded"}


def test_an_allow_list_loads_only_the_named_plugins_and_imports_no_other() -> None:
    result = probe({"TENFERRO_PLUGINS": " webgpu ,"})
    assert loaded(result) == {"cpu", "webgpu"}  # the host's CPU backend always loads
    assert result["imported"] == ["tenferro_host_webgpu"]
    status, reason = result["records"]["ext_add_kernel"]
    assert status == "disabled" and "TENFERRO_PLUGINS" in reason
    assert not any(op.startswith("ext_add_kernel.") for op in result["ops"])
    assert loaded(probe(plugins=["ext_add_kernel"])) == {"cpu", "ext_add_kernel"}
    assert loaded(probe(plugins=[])) == {"cpu"}


def test_builtin_only_loads_no_plugin_of_another_distribution() -> None:
    result = probe(builtin_only=True)
    status, reason = result["records"]["ext_add_kernel"]
    assert status == "disabled" and "--builtin-only" in reason
    assert "ext_add_kernel" not in result["imported"]
    assert "ext_add_kernel.add" not in result["ops"]
    assert {"cpu", "webgpu", "linalg"} <= loaded(result)


def test_the_block_list_wins_over_the_allow_list() -> None:
    result = probe({"TENFERRO_PLUGINS": "webgpu,linalg", "TENFERRO_DISABLE_PLUGINS": "linalg"})
    assert loaded(result) == {"cpu", "webgpu"}
    assert "TENFERRO_DISABLE_PLUGINS" in result["records"]["linalg"][1]


def test_an_allow_list_name_no_plugin_has_is_an_error() -> None:
    with pytest.raises(tf.ValidationError, match="names cdua, which no installed plugin") as info:
        tf.Host(plugins=["webgpu", "cdua"]).plugins  # noqa: B018
    assert "installed: cpu, " in str(info.value)
    with pytest.raises(tf.ValidationError, match="a list of plugin names"):
        tf.Host(plugins="webgpu")


def test_where_a_plugin_comes_from_is_found_without_importing_it() -> None:
    host = tf.Host(plugins=[])
    records = {r.name: r for r in host.plugins.records}
    ext = records["ext_add_kernel"]
    assert ext.status == "disabled" and ext.module == "ext_add_kernel.plugin"
    source = plugin_source(ext)
    assert source["file"] is not None and source["file"].endswith(
        os.path.join("ext_add_kernel", "plugin.py")
    )
    # editable from scripts/setup, installed from the wheels scripts/gpu-tests installs
    assert source["install"] == install_kind("ext-add-kernel", source["file"])
    assert source["url"] is not None and source["url"].startswith("file://")
    cpu = plugin_source(records["cpu"])
    assert cpu["file"] is not None and cpu["file"].endswith(os.path.join("_cpu", "__init__.py"))
    assert module_file("no_such_module_anywhere.sub") is None


@pytest.mark.parametrize(
    ("direct_url", "install", "url"),
    [
        (None, "installed", None),  # a wheel from an index: pip writes no direct_url.json
        ('{"url": "file:///w/x.whl", "archive_info": {}}', "installed", "file:///w/x.whl"),
        ('{"url": "file:///src", "dir_info": {"editable": true}}', "editable", "file:///src"),
        ('{"url": "file:///src", "dir_info": {}}', "installed", "file:///src"),
    ],
    ids=["index", "wheel-file", "editable", "local-dir"],
)
def test_the_install_kind_is_read_from_direct_url(
    monkeypatch: pytest.MonkeyPatch, direct_url: str | None, install: str, url: str | None
) -> None:
    """PEP 610: ``dir_info.editable`` marks an editable install; any other record, or none, an
    installed one, whatever this checkout's own install kind is."""
    from importlib import metadata

    real = metadata.distribution("ext-add-kernel")

    class Recorded:
        def read_text(self, name: str) -> str | None:
            return direct_url if name == "direct_url.json" else real.read_text(name)

    monkeypatch.setattr(metadata, "distribution", lambda name: Recorded())
    record = PluginRecord("ext_add_kernel", "ext-add-kernel", "0.1.0", "disabled", module="x")
    assert plugin_source(record) == {"file": None, "install": install, "url": url}

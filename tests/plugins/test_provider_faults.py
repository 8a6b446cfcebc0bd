"""Faulty third-party plugins: printing, broken providers, capability hooks that lie or raise.

Each plugin is a throw-away distribution (a ``*.dist-info`` directory with an entry point and a
module) on ``PYTHONPATH`` of a fresh interpreter, so the host finds it exactly as it finds an
installed one.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import tenferro_host as tf
from tenferro_host._loader import env_strict


def throwaway_plugins(root: Path, sources: dict[str, str]) -> Path:
    """One distribution per ``name: module source`` under ``root`` (for PYTHONPATH)."""
    for name, source in sources.items():
        info = root / f"fz_{name}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fz-{name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[tenferro_host]\n{name} = fzmod_{name}\n")
        (root / f"fzmod_{name}.py").write_text(textwrap.dedent(source))
    return root


CHATTY = """
    print("chatty: imported")
    from tenferro_host import BackendProvider, BackendStatus, hookimpl
    from tenferro_host._cpu._runtime import CpuRuntime

    def probe():
        print("chatty: probed")
        return BackendStatus("chatty", True, software=True, devices=[{"index": 0}])

    def create(host, index):
        print("chatty: created")
        return CpuRuntime(host, index)

    @hookimpl
    def tenferro_host_register(registry):
        print("chatty: registering")
        registry.add_backend(BackendProvider("chatty", probe, create))

    @hookimpl
    def tenferro_host_capabilities(backend):
        print("chatty: capabilities")
        return None
"""


def test_plugin_prints_go_to_stderr_and_caps_json_stays_json(tmp_path, subproc):
    path = throwaway_plugins(tmp_path, {"chatty": CHATTY})
    proc = subproc.cli("caps", "--json", paths=(path,))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "chatty" in [b["name"] for b in report["backends"]]
    for event in ("imported", "registering", "probed", "created"):
        assert f"chatty: {event}" in proc.stderr


BROKEN_PROVIDERS = """
    from tenferro_host import BackendProvider, BackendStatus, hookimpl

    def available(kind):
        return lambda: BackendStatus(kind, True, devices=[{"index": 0}])

    @hookimpl
    def tenferro_host_register(registry):
        registry.add_backend(BackendProvider("fznone", lambda: None, lambda h, i: None))
        registry.add_backend(BackendProvider("fzboom", available("fzboom"), lambda h, i: 1 / 0))
        registry.add_backend(BackendProvider("fzwrong", available("fzwrong"), lambda h, i: 42))
"""

#: What every probe starts with: a fresh host, and ``plugin_error(call)``, the message of the
#: PluginError ``call()`` raises (None: it raised nothing).
PROBE_START = """
import json
import tenferro_host as tf
host = tf.Host()

def plugin_error(call):
    try:
        call()
    except tf.PluginError as exc:
        return str(exc)
    return None
"""

BROKEN_PROVIDERS_PROBE = (
    PROBE_START
    + """
out = {"status": host.backend_status("fznone").reason}
for kind in ("fznone", "fzboom", "fzwrong"):
    try:
        host.backend(kind)
    except tf.TenferroError as exc:
        out[kind] = [type(exc).__name__, str(exc), type(exc.__cause__).__name__]
print(json.dumps(out))
"""
)


def test_a_broken_provider_leaves_its_backend_unavailable_or_raises_plugin_error(tmp_path, subproc):
    path = throwaway_plugins(tmp_path, {"badprov": BROKEN_PROVIDERS})
    out = subproc.json(BROKEN_PROVIDERS_PROBE, paths=(path,))
    assert "probe() returned NoneType, not a BackendStatus" in out["status"]
    assert out["fznone"][0] == "UnsupportedError"
    assert "returned NoneType" in out["fznone"][1]
    name, message, cause = out["fzboom"]
    assert (name, cause) == ("PluginError", "ZeroDivisionError")
    assert "failed to create fzboom:0: ZeroDivisionError" in message
    name, message, _ = out["fzwrong"]
    assert name == "PluginError" and "returned int from create(), not a Runtime" in message

    caps = subproc.cli("caps", "--json", paths=(path,))
    assert caps.returncode == 0, caps.stderr
    backends = {b["name"]: b for b in json.loads(caps.stdout)["backends"]}
    assert not backends["fznone"]["available"]
    assert "ZeroDivisionError" in backends["fzboom"]["reason"]

    run = subproc.cli(
        "run", "ext_add_kernel.add", "--backend", "fzboom", "--shape", "3", paths=(path,)
    )
    assert run.returncode != 0
    assert "failed to create fzboom:0" in run.stderr
    assert "Traceback" not in run.stderr


CAPABILITY_PLUGINS = {
    "liar": """
        import tenferro_host as tf
        from tenferro_host import hookimpl

        @hookimpl
        def tenferro_host_capabilities(backend):
            return {tf.ExtensionCapability.NATIVE_MODULE: True}
    """,
    "raiser": """
        from tenferro_host import hookimpl

        @hookimpl
        def tenferro_host_capabilities(backend):
            raise RuntimeError("caps hook broke")
    """,
    "ownraiser": """
        from tenferro_host import BackendProvider, BackendStatus, hookimpl
        from tenferro_host._cpu._runtime import CpuRuntime

        class OwnRuntime(CpuRuntime):
            def __init__(self, host, index):
                super().__init__(host, index)
                self.kind = "ownraiser"

        def probe():
            return BackendStatus("ownraiser", True, devices=[{"index": 0}])

        @hookimpl
        def tenferro_host_register(registry):
            registry.add_backend(BackendProvider("ownraiser", probe, OwnRuntime))

        @hookimpl
        def tenferro_host_capabilities(backend):
            raise RuntimeError("own caps hook broke")
    """,
}

CAPABILITY_PROBE = (
    PROBE_START
    + """
NATIVE = tf.ExtensionCapability.NATIVE_MODULE
out = {}
with host.backend("cpu").session() as s:
    out["cpu_native"] = tf.cpu.exec_session(s).supports(NATIVE)
with host.backend("ownraiser").session() as s:
    out["own_native"] = s.exec_session().supports(NATIVE)
out["records"] = {r.name: [r.status, r.error] for r in host.plugins.records if r.name != "cpu"}
strict = tf.Host(strict=True)
out["strict"] = plugin_error(lambda: strict.backend("ownraiser").capabilities())
print(json.dumps(out))
"""
)


def test_only_the_backends_own_provider_answers_its_capabilities(tmp_path, subproc):
    path = throwaway_plugins(tmp_path, CAPABILITY_PLUGINS)
    out = subproc.json(CAPABILITY_PROBE, paths=(path,))
    assert out["cpu_native"] is False  # "liar" claimed it; it does not provide cpu
    assert out["own_native"] is False
    assert out["records"]["liar"] == ["loaded", None]
    assert out["records"]["raiser"] == ["loaded", None]  # never asked: it provides no backend
    status, error = out["records"]["ownraiser"]
    assert status == "error"
    assert error == "tenferro_host_capabilities raised RuntimeError: own caps hook broke"
    assert "plugin 'ownraiser' (fz-ownraiser 0.1) failed" in out["strict"]


@pytest.mark.parametrize(
    ("value", "strict"),
    [
        ("", False), ("0", False), ("false", False), ("No", False), ("OFF", False), (" ", False),
        ("1", True), ("true", True), ("YES", True), (" on ", True),
    ],
)  # fmt: skip
def test_strict_env_reads_as_a_boolean(monkeypatch, value, strict):
    monkeypatch.setenv("TENFERRO_STRICT_PLUGINS", value)
    assert env_strict() is strict


@pytest.mark.parametrize("value", ["2", "maybe", "strict"])
def test_strict_env_that_is_no_boolean_is_a_validation_error(monkeypatch, value):
    monkeypatch.setenv("TENFERRO_STRICT_PLUGINS", value)
    with pytest.raises(tf.ValidationError, match="not a boolean") as info:
        tf.Host()
    assert info.value.argument == "TENFERRO_STRICT_PLUGINS"


EXITING_PLUGINS = {
    "exitimport": "import sys\nsys.exit(3)\n",
    "exitprovider": """
        import sys
        from tenferro_host import BackendProvider, BackendStatus, hookimpl

        @hookimpl
        def tenferro_host_register(registry):
            registry.add_backend(BackendProvider("fzexitprobe", lambda: sys.exit(4), None))
            registry.add_backend(BackendProvider(
                "fzexitcreate",
                lambda: BackendStatus("fzexitcreate", True, devices=[{"index": 0}]),
                lambda host, index: sys.exit(5),
            ))
    """,
}

EXITING_PROBE = (
    PROBE_START
    + """
out = {"records": {r.name: r.error for r in host.plugins.records if r.name.startswith("exit")}}
out["probe"] = host.backend_status("fzexitprobe").reason
out["create"] = plugin_error(lambda: host.backend("fzexitcreate"))
print(json.dumps(out))
"""
)


def test_a_plugin_calling_sys_exit_is_a_recorded_failure_not_the_end(tmp_path, subproc):
    path = throwaway_plugins(tmp_path, EXITING_PLUGINS)
    out = subproc.json(EXITING_PROBE, paths=(path,))
    assert out["records"] == {"exitimport": "SystemExit: 3", "exitprovider": None}
    assert out["probe"] == "probing the backend failed: SystemExit: 4"
    assert "failed to create fzexitcreate:0: SystemExit: 5" in out["create"]
    caps = subproc.cli("caps", "--json", paths=(path,))
    assert caps.returncode == 0, caps.stderr
    plugins = {p["name"]: p for p in json.loads(caps.stdout)["plugins"]}
    assert plugins["exitimport"]["status"] == "error"

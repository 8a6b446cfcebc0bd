"""The CLI in fresh processes, with fixture distributions installed beside the real plugins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.install_kind import install_kind

from tenferro_host._loader import module_file


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tenferro-host:")]


def test_caps_json_lists_a_broken_plugin_while_the_rest_works(subproc, fixture_dists):
    proc = subproc.cli("caps", "--json", paths=(fixture_dists.faulty,))
    assert proc.returncode == 0, proc.stderr
    caps = json.loads(proc.stdout)  # stdout is the JSON document and nothing else
    plugins = {p["name"]: p for p in caps["plugins"]}
    broken = plugins["tf_fixture_broken_import"]
    assert (broken["status"], broken["dist"], broken["version"]) == (
        "error",
        "tf-fixture-broken-import",
        "1.0",
    )
    assert "ImportError" in broken["error"]
    assert plugins["ext_add_kernel"]["status"] == "loaded"
    backends = {b["name"]: b for b in caps["backends"]}
    assert backends["cpu"]["available"] and not backends["rocm"]["available"]
    ops = {o["name"]: o for o in caps["ops"]}
    assert ops["ext_add_kernel.add"]["status"] == "ok"


def test_run_check_exits_0_beside_broken_plugins(subproc, fixture_dists):
    # the installed console script; a `pip install --target` (the GPU machine) has none beside
    # the interpreter, and `python -m tenferro_host` runs the same entry
    script = Path(sys.executable).with_name("tenferro-host")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "tenferro_host"]
    proc = subproc.run(
        [*command, "run", "ext_add_kernel.add", "--backend", "cpu", "--check"],
        (fixture_dists.faulty,),
    )
    assert proc.returncode == 0, proc.stderr
    assert "check: passed" in proc.stdout


def test_run_check_mismatch_exits_1_with_a_clear_message(subproc, fixture_dists):
    proc = subproc.cli(
        "run",
        "tf_fixture_wrong_op.add",
        "--backend",
        "cpu",
        "--check",
        "--shape",
        "100",
        "--repeat",
        "1",
        paths=(fixture_dists.faulty,),
    )
    assert proc.returncode == 1
    (line,) = error_lines(proc.stderr)
    assert line.startswith("tenferro-host: check failed: tf_fixture_wrong_op.add on cpu:0: ")
    assert "output 'out' differs from the reference at" in line
    assert "ms per run" not in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_strict_mode_is_fatal(subproc, fixture_dists, how):
    args = ["caps", "--json"] + (["--strict"] if how == "flag" else [])
    env = {"TENFERRO_STRICT_PLUGINS": "1"} if how == "env" else {}
    proc = subproc.cli(*args, paths=(fixture_dists.faulty,), **env)
    assert proc.returncode == 2  # and --json's one document on stdout is the error's
    assert json.loads(proc.stdout)["error"]["type"] == "PluginError"
    (line,) = error_lines(proc.stderr)
    assert line.startswith("tenferro-host: plugin error: plugin ")
    assert "failed" in line and "Traceback" not in proc.stderr


def test_an_op_whose_plugin_failed_to_load_is_the_packages_bug_exit_3(subproc, fixture_dists):
    proc = subproc.cli(
        "run", "tf_fixture_broken_import.add", "--backend", "cpu", paths=(fixture_dists.faulty,)
    )
    assert proc.returncode == 3
    (line,) = error_lines(proc.stderr)
    assert line.startswith("tenferro-host: op error: no op named 'tf_fixture_broken_import.add'")
    assert "the plugin of its package failed to load or register: " in line
    assert "'tf_fixture_broken_import' (tf-fixture-broken-import 1.0: ImportError" in line


def test_a_mistyped_op_names_the_plugins_that_failed_to_load(subproc, fixture_dists):
    proc = subproc.cli(
        "run", "tf_fixture_typo.add", "--backend", "cpu", paths=(fixture_dists.faulty,)
    )
    assert proc.returncode == 2
    (line,) = error_lines(proc.stderr)
    assert "no op named 'tf_fixture_typo.add'" in line
    assert "plugins that failed to load (the op may be theirs): " in line
    assert "'tf_fixture_broken_import' (tf-fixture-broken-import 1.0: ImportError" in line


def test_ops_lists_a_conflict_naming_both_distributions(subproc, fixture_dists):
    proc = subproc.cli("ops", "--json", paths=(fixture_dists.collide,))
    assert proc.returncode == 0, proc.stderr
    ops = {o["name"]: o for o in json.loads(proc.stdout)}
    add = ops["ext_add_kernel.add"]
    assert add["status"] == "conflict" and add["variants"] == {}
    assert add["dist"] == "ext-add-kernel, tf-fixture-collide"


def test_builtin_only_imports_no_third_party_plugin(subproc, fixture_dists):
    """With ``--strict``, a broken fixture that were imported would fail the command: with
    ``--builtin-only`` none is, and each is listed with where its code is."""
    proc = subproc.cli(
        "plugins", "--json", "--builtin-only", "--strict", paths=(fixture_dists.faulty,)
    )
    assert proc.returncode == 0, proc.stderr
    plugins = {p["name"]: p for p in json.loads(proc.stdout)}
    broken = plugins["tf_fixture_broken_import"]
    assert broken["status"] == "disabled" and "--builtin-only" in broken["reason"]
    assert broken["error"] is None
    assert broken["file"] == str(fixture_dists.faulty / "tf_fixture_broken_import" / "__init__.py")
    assert broken["install"] == "installed"  # pip --target of a directory: not editable
    assert plugins["ext_add_kernel"]["status"] == "disabled"
    webgpu = plugins["webgpu"]
    assert (webgpu["status"], webgpu["dist"], webgpu["module"]) == (
        "loaded",
        "tenferro-host",
        "tenferro_host_webgpu",
    )
    for command in ("caps", "ops"):
        proc = subproc.cli(command, "--json", "--builtin-only", paths=(fixture_dists.faulty,))
        assert proc.returncode == 0, proc.stderr
        ops = json.loads(proc.stdout) if command == "ops" else json.loads(proc.stdout)["ops"]
        names = {o["name"] for o in ops}
        assert "ext_add_kernel.add" not in names and any(n.startswith("linalg.") for n in names)


def test_plugins_table_shows_install_kind_and_each_plugin_file(subproc):
    proc = subproc.cli("plugins", TENFERRO_PLUGINS="ext_add_kernel")
    assert proc.returncode == 0, proc.stderr
    assert "allow-list" in proc.stdout
    code = proc.stdout.split("Code:\n", 1)[1].splitlines()
    ext = next(line for line in code if line.split()[0] == "ext_add_kernel")
    assert ext.split()[1].endswith(str(Path("ext_add_kernel") / "plugin.py"))
    row = next(line for line in proc.stdout.splitlines() if " ext_add_kernel " in line)
    assert install_kind("ext-add-kernel", module_file("ext_add_kernel.plugin") or "") in row


def test_an_unknown_allow_list_name_is_a_one_line_error(subproc):
    proc = subproc.cli("plugins", TENFERRO_PLUGINS="webgpu,cdua")
    assert proc.returncode == 2
    assert error_lines(proc.stderr) == [line for line in proc.stderr.splitlines() if line]
    assert "cdua" in proc.stderr and "TENFERRO_PLUGINS" in proc.stderr


def test_plugins_table_at_80_columns_says_each_error_once_under_the_table(subproc, fixture_dists):
    document = subproc.cli("plugins", "--json", paths=(fixture_dists.faulty,))
    errors = [p["error"] for p in json.loads(document.stdout) if p["error"]]
    proc = subproc.cli("plugins", paths=(fixture_dists.faulty,), COLUMNS="80")
    assert proc.returncode == 0 and errors
    table, code = proc.stdout.split("Code:\n", 1)  # under it, one module file per line
    lines = table.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80, proc.stdout
    assert len(code.splitlines()) == len(json.loads(document.stdout))
    assert len([line for line in lines if line.startswith("│")]) == len(json.loads(document.stdout))
    flat = " ".join(proc.stdout.split())
    for error in errors:
        assert flat.count(" ".join(error.split())) == 1, error

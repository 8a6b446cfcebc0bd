"""The CLI in this process: caps/plugins/ops output, run with --check, errors and exit codes."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os

import pytest

import tenferro_host as tf
from tenferro_host._cli import build_parser, caps_report, main, parse_attr, shape_arg
from tenferro_host.provider import _compiled

CAPABILITY_NAMES = {c.name for c in tf.ExtensionCapability}
OPTIONAL_STR = (str, type(None))


#: ``run`` of the example op on the CPU backend: the options follow.
RUN_ADD_ON_CPU = ("run", "ext_add_kernel.add", "--backend", "cpu")


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def caps():
    """``caps --json``, parsed: one run for the module; stdout must be JSON only."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["caps", "--json"]) == 0
    return json.loads(buffer.getvalue())


def test_caps_schema_top_level(caps):
    assert set(caps) == {"schema_version", "backends", "plugins", "ops", "op_call"}
    assert caps["schema_version"] == 1
    switched_off = os.environ.get(_compiled.SWITCH) == "0"
    assert caps["op_call"] == ("compiled" if not switched_off else _compiled.STATE)
    assert switched_off == caps["op_call"].startswith("pure Python")


def test_caps_schema_backends(caps):
    for b in caps["backends"]:
        assert set(b) == {
            "name",
            "kind",
            "available",
            "reason",
            "software",
            "devices",
            "capabilities",
        }
        assert isinstance(b["name"], str) and isinstance(b["kind"], str)
        assert isinstance(b["available"], bool) and isinstance(b["software"], bool)
        assert isinstance(b["reason"], OPTIONAL_STR) and isinstance(b["devices"], list)
        assert set(b["capabilities"]) == CAPABILITY_NAMES
        assert all(isinstance(v, bool) for v in b["capabilities"].values())
        if not b["available"]:
            assert b["reason"] and not any(b["capabilities"].values())


def test_caps_schema_plugins_and_ops(caps):
    for p in caps["plugins"]:
        assert set(p) == {"name", "dist", "version", "status", "error"}
        assert all(isinstance(p[k], str) for k in ("name", "dist", "version", "status"))
        assert p["status"] in {"loaded", "error", "disabled"}
        assert isinstance(p["error"], OPTIONAL_STR)
        assert (p["error"] is None) == (p["status"] != "error")
    for o in caps["ops"]:
        assert set(o) == {"name", "dist", "status", "variants", "unavailable"}
        assert all(isinstance(v, str) for v in o["unavailable"].values())
        assert o["status"] in {"ok", "conflict"}
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in o["variants"].items())


def test_caps_content(caps):
    backends = {b["name"]: b for b in caps["backends"]}
    assert backends["cpu"]["available"] and backends["cpu"]["capabilities"]["JIT_KERNEL"]
    assert backends["cpu"]["kind"] == "cpu" and backends["cpu"]["devices"]
    assert not backends["rocm"]["available"]
    assert "no validated HIP substrate" in backends["rocm"]["reason"]
    plugins = {p["name"]: p for p in caps["plugins"]}
    assert plugins["ext_add_kernel"]["status"] == "loaded"
    assert plugins["ext_add_kernel"]["dist"] == "ext-add-kernel"
    ops = {o["name"]: o for o in caps["ops"]}
    assert ops["ext_add_kernel.add"]["status"] == "ok"
    assert ops["ext_add_kernel.add"]["variants"]["cpu"] == "cpu"


def test_plugins_and_ops_json_equal_the_caps_sections(capsys, caps):
    code, out, _ = run_main(capsys, "plugins", "--json")
    schema_1 = {"name", "dist", "version", "status", "error"}
    assert code == 0 and [{k: p[k] for k in schema_1} for p in json.loads(out)] == caps["plugins"]
    code, out, _ = run_main(capsys, "ops", "--json")
    ops = json.loads(out)
    assert code == 0 and [{k: o[k] for k in o if k != "kernels"} for o in ops] == caps["ops"]


def test_ops_lists_shipped_kernels_with_their_build_info(capsys):
    from ext_add_kernel import cuda_raw

    _code, out, _ = run_main(capsys, "ops", "--json")
    (add,) = [o for o in json.loads(out) if o["name"] == "ext_add_kernel.add"]
    (kernel,) = add["kernels"]
    assert kernel["name"] == "add_kernel" and kernel["language"] == "cuda"
    assert kernel["build_info"] == cuda_raw.build_info()
    expected = "prebuilt sm_80" if kernel["build_info"].get("fatbin") else "compiled at run time"
    assert expected in kernel["summary"]


def test_kernel_source_describes_its_build():
    built = tf.KernelSource(
        "k",
        "cuda",
        "",
        build_info={"fatbin": "k.fatbin", "gencode": ["arch=compute_90,code=sm_90"]},
    )
    assert built.describe() == "k (cuda): prebuilt sm_90"
    missing = tf.KernelSource("k", "cuda", "", build_info={"fatbin": None, "reason": "no nvcc"})
    assert missing.describe() == "k (cuda): compiled at run time (no nvcc)"


def test_human_caps_renders_tables(capsys):
    code, out, _ = run_main(capsys, "caps")
    assert code == 0
    for text in (
        "Backends",
        "Plugins",
        "Operations",
        "cpu",
        "rocm",
        "ext_add_kernel.add",
        "JIT_KERNEL",
        "loaded",
    ):
        assert text in out
    code, out, _ = run_main(capsys, "ops")
    assert code == 0 and "ext_add_kernel.add" in out and "Backends" not in out


def test_run_check_passes_on_cpu(capsys):
    code, out, err = run_main(
        capsys, *RUN_ADD_ON_CPU, "--check", "--shape", "1000", "--repeat", "2"
    )
    assert code == 0, err
    assert "ms per run" in out and "check: passed" in out


def test_run_json(capsys):
    code, out, _ = run_main(
        capsys,
        *RUN_ADD_ON_CPU,
        "--json",
        "--check",
        "--shape",
        "3x4",
        "--dtype",
        "int32",
        "--repeat",
        "3",
    )
    assert code == 0
    result = json.loads(out)
    assert result["op"] == "ext_add_kernel.add" and result["backend"] == "cpu:0"
    assert (result["variant"], result["dtype"], result["shape"]) == ("cpu", "int32", [3, 4])
    assert result["repeat"] == 3 and result["check"] == "passed" and result["mismatch"] is None
    assert isinstance(result["seconds_per_run"], float) and result["seconds_per_run"] > 0


def test_run_on_empty_and_default_backend(capsys):
    code, out, _ = run_main(
        capsys, "run", "ext_add_kernel.add", "--shape", "0", "--json", "--check", "--repeat", "1"
    )
    assert code == 0
    result = json.loads(out)
    assert result["shape"] == [0] and result["check"] == "passed"
    assert result["backend"] == tf.Host().default_backend()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "nope.op"], "no op named 'nope.op'"),
        (["run", "ext_add_kernel.add", "--backend", "rocm"], "no validated HIP substrate"),
        (["run", "ext_add_kernel.add", "--backend", "tpu"], "no provider plugin"),
        (["run", "ext_add_kernel.add", "--backend", "CPU"], "kind[:index]"),
        (["run", "ext_add_kernel.add", "--dtype", "bool"], "does not accept bool"),
        (["run", "ext_add_kernel.add", "--dtype", "nope"], "is not a dtype"),
        (["run", "ext_add_kernel.add", "--attr", "alpha=1"], "op has no attributes"),
        (
            ["run", "ext_add_kernel.add", "--shape", "100000x100000x100000"],
            "cannot make 2 input(s) of float32 that large",
        ),
        (["run", "ext_add_kernel.add", "--variant", "nope"], "has cpu, cuda-raw, dsl"),
        (
            ["run", "ext_add_kernel.add", "--backend", "cpu", "--variant", "cuda-raw"],
            "does not run on cpu:0",
        ),
        (["check", "nope"], "no op named 'nope'"),
        (["check", "ext_add_kernel.add", "--attr", "alpha=1"], "op has no attributes"),
    ],
)
def test_library_errors_exit_2_with_one_line(capsys, argv, message):
    code, out, err = run_main(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("tenferro-host: error: ") and err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["run"],
        ["run", "x.y", "--shape", "abc"],
        ["run", "x.y", "--shape", "-1"],
        ["run", "x.y", "--repeat", "0"],
        ["caps", "--bogus"],
        ["run", "x.y", "--seed", "-1"],
        ["run", "x.y", "--rtol", "-1"],
        ["run", "x.y", "--atol", "nan"],
        ["check"],
        ["check", "x", "--backends", ","],
        ["new-op"],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: tenferro-host" in capsys.readouterr().err


#: Each command whose --json switch prints JSON on stdout, with the rest of an argv that fails
#: the same way for all of them once TENFERRO_PLUGINS names no installed plugin.
JSON_COMMANDS = {
    "caps": [],
    "plugins": [],
    "ops": [],
    "run": ["x.y"],
    "check": ["x.y"],
    "cache": ["stats"],
}


def test_json_commands_lists_every_command_with_the_json_switch():
    """A new command taking --json must join JSON_COMMANDS (bench's --json is a path)."""
    commands = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices
    switched = {
        name
        for name, parser in commands.items()
        if any(a.option_strings == ["--json"] and a.nargs == 0 for a in parser._actions)
    }
    assert switched == set(JSON_COMMANDS)


def error_document(out: str, err: str, code: int) -> dict:
    """The error document on stdout, checked against the one line on stderr and the code."""
    document = json.loads(out)
    error = document["error"]
    assert document["schema_version"] == 1 and error["exit_code"] == code
    assert err.count("\n") == 1 and err.rstrip("\n").endswith(f": {error['message']}")
    return error


@pytest.mark.parametrize("command", sorted(JSON_COMMANDS))
def test_every_json_command_prints_one_error_document_when_it_fails(capsys, monkeypatch, command):
    monkeypatch.setenv("TENFERRO_PLUGINS", "no_such_plugin")
    code, out, err = run_main(capsys, command, *JSON_COMMANDS[command], "--json")
    assert code == 2 and err.startswith("tenferro-host: error: ")
    error = error_document(out, err, code)
    assert error["type"] == "ValidationError" and error["op"] is None
    assert "no_such_plugin" in error["message"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "nonexistent.op"], "no op named 'nonexistent.op'"),
        (["check", "ext_add_kernel.add", "--backends", "bogus"], "--backends bogus: no such name"),
        (["run", "ext_add_kernel.add", "--attr", "alpha=1"], "op has no attributes"),
    ],
)
def test_a_command_error_under_json_is_a_json_document(capsys, argv, message):
    code, out, err = run_main(capsys, *argv, "--json")
    assert code == 2
    error = error_document(out, err, code)
    assert error["type"] == "ValidationError" and message in error["message"]


def test_shape_arg():
    assert shape_arg("1000000") == (1_000_000,)
    assert shape_arg("2,3,4") == shape_arg("2x3x4") == (2, 3, 4)
    for bad in ("", "a", "2,,3", "-1", "1.5"):
        with pytest.raises(Exception, match="not a shape"):
            shape_arg(bad)


def test_parse_attr():
    attrs = {"n": int, "scale": float, "flag": bool, "mode": str}
    assert parse_attr("n=3", attrs, "p.op") == ("n", 3)
    assert parse_attr("scale=0.5", attrs, "p.op") == ("scale", 0.5)
    assert parse_attr("flag=true", attrs, "p.op") == ("flag", True)
    assert parse_attr("flag=0", attrs, "p.op") == ("flag", False)
    assert parse_attr("mode=a=b", attrs, "p.op") == ("mode", "a=b")
    for bad, match in [
        ("n=x", "not a valid int"),
        ("flag=yes", "not a valid bool"),
        ("other=1", "NAME one of flag, mode, n, scale"),
        ("n", "NAME=VALUE"),
    ]:
        with pytest.raises(tf.ValidationError, match=match) as info:
            parse_attr(bad, attrs, "p.op")
        assert info.value.argument == "attr" and info.value.op == "p.op"


def test_parse_attr_reads_a_literal_for_an_attribute_declared_object_or_a_container():
    attrs = {"axis": object, "axes": tuple}
    assert parse_attr("axis=0", attrs, "p.op") == ("axis", 0)
    assert parse_attr("axis=None", attrs, "p.op") == ("axis", None)
    assert parse_attr("axis=(0, -1)", attrs, "p.op") == ("axis", (0, -1))
    assert parse_attr("axes=((1,), (0,))", attrs, "p.op") == ("axes", ((1,), (0,)))
    for bad, match in [
        ("axis=__import__('os')", "is not a Python literal"),
        ("axis=rows", "is not a Python literal"),
        ("axis=" + "(" * 10_000, "is not a Python literal"),
        ("axes=1", "is a int, the op declares a tuple"),
    ]:
        with pytest.raises(tf.ValidationError, match=match) as info:
            parse_attr(bad, attrs, "p.op")
        assert info.value.argument == "attr" and info.value.op == "p.op"


@pytest.mark.parametrize(
    "argv",
    [
        ["linalg.sum", "--shape", "3x4", "--attr", "axis=0"],
        ["linalg.tensordot", "--shape", "3x3", "--attr", "axes=1"],
    ],
)
def test_run_checks_an_op_with_an_object_attribute(capsys, argv):
    code, out, err = run_main(capsys, "run", *argv, "--check", "--backend", "cpu", "--repeat", "1")
    assert code == 0 and "check: passed" in out, err


def test_caps_survives_a_provider_whose_runtime_cannot_be_created():
    def create(host, index):
        raise RuntimeError("driver exploded")

    host = tf.Host()
    view = host.registry.staging("broken-provider")
    probe = lambda: tf.BackendStatus("broken", True, devices=[{"index": 0}])  # noqa: E731
    view.add_backend(tf.BackendProvider("broken", probe, create))
    view.commit()
    broken = next(b for b in caps_report(host)["backends"] if b["name"] == "broken")
    assert broken["available"] and not any(broken["capabilities"].values())
    assert broken["reason"] == (
        "could not create a runtime: PluginError: the provider of backend 'broken' failed to "
        "create broken:0: RuntimeError: driver exploded; fix or uninstall the plugin that "
        "provides it"
    )


def test_run_forces_a_variant_and_overrides_tolerances(capsys):
    code, out, err = run_main(
        capsys,
        *RUN_ADD_ON_CPU,
        "--variant",
        "dsl",
        "--check",
        "--json",
        "--repeat",
        "1",
        "--rtol",
        "0",
        "--atol",
        "0",
        "--shape",
        "100",
    )
    result = json.loads(out)
    assert code == 0, err
    assert (result["variant"], result["check"]) == ("dsl", "passed")


def test_check_ext_add_kernel_passes(capsys):
    code, out, err = run_main(capsys, "check", "ext_add_kernel", "--json", "--backends", "cpu")
    report = json.loads(out)
    assert code == 0 and report["exit_code"] == 0, err
    assert report["ops"] == ["ext_add_kernel.add"]
    checks = {(c["variant"], c["backend"], c["check"]): c["status"] for c in report["cases"]}
    assert checks[("cpu", "cpu", "values")] == checks[("dsl", "cpu", "views")] == "passed"
    assert checks[("cuda-raw", "none", "launch-args")] in ("passed", "skipped")
    assert report["summary"]["failed"] == report["summary"]["error"] == 0


def test_check_by_distribution_name_and_compile_only(capsys):
    code, out, _ = run_main(capsys, "check", "ext-add-kernel", "--json", "--compile-only")
    report = json.loads(out)
    assert code == 0 and {c["backend"] for c in report["cases"]} == {"none"}


def test_check_human_output_has_a_summary_table(capsys):
    code, out, _ = run_main(
        capsys, "check", "ext_add_kernel.add", "--variants", "cpu", "--backends", "cpu"
    )
    assert code == 0 and "Conformance: 5 passed, 0 failed, 0 skipped, 0 error" in out


def test_new_op_refuses_a_bad_name_with_exit_2(capsys, tmp_path):
    code, _out, err = run_main(capsys, "new-op", "Bad-Name", "--dir", str(tmp_path))
    assert code == 2 and "is not a package name" in err


def test_new_op_names_the_file_it_wrote(capsys, tmp_path):
    code, out, _err = run_main(capsys, "new-op", "tf_hint_ops", "--dir", str(tmp_path))
    edit = out.split("edit ", 1)[1].split(",", 1)[0]
    assert code == 0 and edit == str(tmp_path / "tf_hint_ops" / "tf_hint_ops" / "plugin.py")
    assert (tmp_path / "tf_hint_ops" / "tf_hint_ops" / "plugin.py").is_file()


@pytest.mark.parametrize(
    ("name", "message"),
    [("x" * 300, "characters long; use at most"), ("numpy", "taken by an installed module")],
)
def test_new_op_refuses_long_and_shadowing_names_with_one_line(capsys, tmp_path, name, message):
    code, out, err = run_main(capsys, "new-op", name, "--dir", str(tmp_path))
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err
    assert list(tmp_path.iterdir()) == []

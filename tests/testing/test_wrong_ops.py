"""Fixture ops each wrong in one way, caught by `tenferro-host check`, `run --check` and pytest
with a clear message and the documented exit code (0 pass, 1 a check failed, 3 an op raised).
"""

from __future__ import annotations

import json
import textwrap

import pytest
from support.kit_install import install_kit_fixtures


@pytest.fixture(scope="module")
def kit_dists(tmp_path_factory):
    """The installed ``tf-kit-wrong`` and ``tf-kit-exit`` distributions (for PYTHONPATH)."""
    return install_kit_fixtures(tmp_path_factory)


#: op -> (the case that must fail, what its message must say)
CAUGHT = {
    "wrong_on_one_backend": ("cpu-cpu-values", "output 'out' differs from the reference"),
    "float64_out": ("cpu-cpu-values", "returned output 'out' as float64; its dtype_rule says"),
    "numpy_out": ("cpu-cpu-values", "returned a ndarray as output 'out', not a Tensor"),
    "other_runtime": ("cpu-cpu-values", "returned output 'out' on cpu:0#"),
    "leaks_handle": ("dsl-cpu-sessions", "outlived its session"),
    "ignores_strides": ("cpu-cpu-views", "accepted a non-compact input silently"),
    "reads_output": ("cpu-cpu-values", "got np.float32(nan)"),
    "implicit_transfer": ("cpu-cpu-values", "moved data or waited inside the call"),
    "bad_launch_args": (
        "cuda-raw-none-launch-args",
        "launch of kernel 'double_it' passes 2 argument(s) of [8, 8] bytes; its PTX .entry takes 3",
    ),
}


@pytest.fixture(scope="module")
def report(subproc, kit_dists):
    """``check tf_kit_wrong --json --backends cpu`` (GPU-less cases included), parsed."""
    proc = subproc.cli("check", "tf_kit_wrong", "--json", "--backends", "cpu", paths=(kit_dists,))
    document = json.loads(proc.stdout)
    assert proc.returncode == document["exit_code"] == 3  # tf_kit_wrong.raises raised
    return document


@pytest.mark.parametrize("op", sorted(CAUGHT))
def test_each_wrong_op_is_caught_with_a_clear_message(report, op):
    case, message = CAUGHT[op]
    cases = {c["id"]: c for c in report["cases"]}
    found = cases[f"tf_kit_wrong.{op}-{case}"]
    assert found["status"] == "failed" and message in found["message"], found


def test_the_right_ops_pass_and_a_raising_op_is_an_error(report):
    by_op: dict[str, set[str]] = {}
    for c in report["cases"]:
        by_op.setdefault(c["op"], set()).add(c["status"])
    assert by_op["tf_kit_wrong.good"] <= {"passed", "skipped"}
    assert "passed" in by_op["tf_kit_wrong.good"]
    raised = [
        c for c in report["cases"] if c["op"] == "tf_kit_wrong.raises" and c["status"] == "error"
    ]
    assert raised and "raised ZeroDivisionError: a bug in the variant" in raised[0]["message"]
    assert report["summary"]["error"] == len([c for c in report["cases"] if c["status"] == "error"])


@pytest.mark.parametrize(("op", "code"), [("good", 0), ("float64_out", 1), ("raises", 3)])
def test_check_exit_codes(subproc, kit_dists, op, code):
    proc = subproc.cli("check", f"tf_kit_wrong.{op}", "--backends", "cpu", paths=(kit_dists,))
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Conformance:" in proc.stdout and "Traceback" not in proc.stderr


def test_run_check_exit_codes(subproc, kit_dists):
    bad = subproc.cli(
        "run",
        "tf_kit_wrong.float64_out",
        "--backend",
        "cpu",
        "--check",
        "--shape",
        "5",
        "--repeat",
        "1",
        paths=(kit_dists,),
    )
    assert bad.returncode == 1
    assert "its dtype_rule says float32" in bad.stderr
    raised = subproc.cli(
        "run", "tf_kit_wrong.raises", "--backend", "cpu", "--shape", "5", paths=(kit_dists,)
    )
    assert raised.returncode == 3 and "Traceback" not in raised.stderr
    assert raised.stderr.startswith("tenferro-host: op error: op 'tf_kit_wrong.raises'")
    assert "raised ZeroDivisionError: a bug in the variant" in raised.stderr
    ones = subproc.cli(
        "run",
        "tf_kit_wrong.ones",
        "--backend",
        "cpu",
        "--check",
        "--repeat",
        "1",
        paths=(kit_dists,),
    )
    assert ones.returncode == 0 and "check: passed" in ones.stdout, ones.stderr


def test_the_pytest_kit_reports_the_same_failures(subproc, kit_dists, tmp_path):
    (tmp_path / "test_ops.py").write_text(
        textwrap.dedent("""
        from tenferro_host.testing import conformance_test

        test_good = conformance_test("tf_kit_wrong.good")
        test_f64 = conformance_test("tf_kit_wrong.float64_out")
        test_raw = conformance_test("tf_kit_wrong.bad_launch_args")
    """)
    )
    proc = subproc.pytest("-rfs", "--tf-backends=cpu", str(tmp_path), paths=(kit_dists,))
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "FAILED" in out and "its dtype_rule says float32" in out
    assert "its PTX .entry takes 3" in out
    assert "::test_good[" not in out  # no good case among the failures
    assert "failed" in out.splitlines()[-1] and "passed" in out.splitlines()[-1]
    compile_only = subproc.pytest(
        "--tf-compile-only", "--collect-only", str(tmp_path), paths=(kit_dists,)
    )
    ids = [line for line in compile_only.stdout.splitlines() if "::" in line]
    cased = [line for line in ids if "NOTSET" not in line]  # float64_out has no GPU-less case
    assert cased and all("-none-" in line for line in cased), compile_only.stdout
    # node ids are relative to the inner run's rootdir, which depends on where the clone lives
    assert any(line.endswith("test_ops.py::test_f64[NOTSET]") for line in ids), ids


def test_plugin_loads_with_dash_p_when_autoload_is_off(subproc, tmp_path):
    (tmp_path / "test_host.py").write_text(
        "def test_host(host, backend_name):\n    assert host.backend(backend_name)\n"
    )
    off = subproc.pytest(str(tmp_path), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert off.returncode != 0 and "fixture 'host' not found" in off.stdout
    on = subproc.pytest(
        str(tmp_path),
        "-p",
        "tenferro_host.testing",
        "--tf-backends=cpu",
        "--collect-only",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    assert on.returncode == 0, on.stdout
    assert "test_host.py::test_host[cpu]" in on.stdout and "webgpu" not in on.stdout
    everywhere = subproc.pytest(
        str(tmp_path), "-p", "tenferro_host.testing", "-rs", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"
    )
    assert everywhere.returncode == 0, everywhere.stdout


def test_system_exit_in_a_plugin_or_a_variant_does_not_end_the_cli(subproc, kit_dists):
    plugins = subproc.cli("plugins", "--json", paths=(kit_dists,))
    assert plugins.returncode == 0, plugins.stderr
    record = {p["name"]: p for p in json.loads(plugins.stdout)}["tf_kit_exit"]
    assert (record["status"], record["error"]) == ("error", "SystemExit: 7")
    exits = subproc.cli(
        "run", "tf_kit_wrong.exits", "--backend", "cpu", "--shape", "3", paths=(kit_dists,)
    )
    assert exits.returncode == 3 and "raised SystemExit: 5" in exits.stderr
    check = subproc.cli(
        "check", "tf_kit_wrong.exits", "--json", "--backends", "cpu", paths=(kit_dists,)
    )
    assert check.returncode == 3 and json.loads(check.stdout)["summary"]["error"] >= 1


def test_run_on_a_backend_without_a_variant_exits_2(subproc, kit_dists):
    proc = subproc.cli("run", "tf_kit_wrong.float64_out", "--backend", "webgpu", paths=(kit_dists,))
    if "unavailable" in proc.stderr:
        pytest.skip(f"no WebGPU adapter here: {proc.stderr.strip()}")
    assert proc.returncode == 2
    assert "has no variant for backend 'webgpu:0' (it has cpu)" in proc.stderr


def test_each_wrong_op_alone_gets_the_documented_exit_code(subproc, kit_dists):
    code = textwrap.dedent("""
        import contextlib, io, json
        from tenferro_host._cli import main
        codes = {}
        for op in %r:
            with contextlib.redirect_stdout(io.StringIO()):
                codes[op] = main(["check", "tf_kit_wrong." + op, "--json", "--backends", "cpu"])
        print(json.dumps(codes))
    """) % sorted([*CAUGHT, "raises", "exits", "good"])
    codes = subproc.json(code, (kit_dists,))
    assert codes == {**dict.fromkeys(CAUGHT, 1), "raises": 3, "exits": 3, "good": 0}


def test_a_missing_op_names_the_plugin_with_a_syntax_error_by_full_path(subproc, kit_dists):
    proc = subproc.cli("run", "tf_kit_syntax.op", "--backend", "cpu", paths=(kit_dists,))
    assert proc.returncode == 3  # the op's own plugin failed: a bug in its package
    assert "the plugin of its package failed to load or register: " in proc.stderr
    assert "'tf_kit_syntax' (tf-kit-syntax 1.0: SyntaxError" in proc.stderr
    path = kit_dists / "tf_kit_syntax" / "plugin.py"
    assert f"SyntaxError: expected ':' ({path}, line 3)" in proc.stderr

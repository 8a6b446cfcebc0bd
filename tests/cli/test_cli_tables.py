"""The CLI's tables in an 80-column terminal: no line wider, no word broken, one line per op,
a long text said once under its table; ``--wide`` puts every column of a row on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tenferro_host._cli import main


def run_main(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture
def columns_80(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")


def texts_of(command: str, document) -> list[str]:
    """The long texts of a ``--json`` document that the table shows as notes or cells."""
    if command == "plugins":
        return [p["error"] for p in document if p["error"]]
    if command == "ops":
        return [r for o in document for r in o["unavailable"].values()]
    backends = [b["reason"] for b in document["backends"] if b["reason"]]
    devices = [d.get("name", "") for b in document["backends"] for d in b["devices"]]
    return backends + devices + texts_of("plugins", document["plugins"])


@pytest.mark.parametrize("command", ["caps", "ops", "plugins"])
def test_tables_fit_80_columns_and_break_no_word(capsys, columns_80, command):
    code, out = run_main(capsys, command)
    assert code == 0
    table = out.split("Code:\n", 1)[0]  # under it, a whole module path per plugin line
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 80, out
    words = set(out.split())
    _, document = run_main(capsys, command, "--json")
    for text in texts_of(command, json.loads(document)):
        for word in text.split():
            assert word in words or len(word) > 32, (word, out)  # only a huge word folds


def test_ops_prints_one_line_per_op_and_a_shared_reason_once(capsys, columns_80):
    _, document = run_main(capsys, "ops", "--json")
    ops = json.loads(document)
    _, out = run_main(capsys, "ops")
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == len(ops)
    for op, row in zip(ops, rows, strict=True):
        assert row.split("│")[1].strip() == op["name"]
        for backend, kind in op["variants"].items():
            assert kind in row, (backend, row)
    flat = " ".join(out.split())
    for reason in {r for o in ops for r in o["unavailable"].values()}:
        assert flat.count(" ".join(reason.split())) == 1, reason


def test_wide_ops_puts_distribution_and_kernels_on_the_op_line(capsys, columns_80):
    _, document = run_main(capsys, "ops", "--json")
    ops = {o["name"]: o for o in json.loads(document)}
    _, out = run_main(capsys, "ops", "--wide")
    (row,) = [line for line in out.splitlines() if "ext_add_kernel.add" in line]
    add = ops["ext_add_kernel.add"]
    assert add["dist"] in row and add["kernels"][0]["summary"] in row
    assert len([line for line in out.splitlines() if line.startswith("│")]) == len(ops)


def test_check_lists_one_line_per_case_and_each_skip_reason_once(capsys, columns_80):
    code, document = run_main(capsys, "check", "ext_add_kernel.add", "--json")
    report = json.loads(document)
    code, out = run_main(capsys, "check", "ext_add_kernel.add")
    assert code == report["exit_code"] == 0
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == len(report["cases"])
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80
    flat = " ".join(out.split())
    for message in {c["message"] for c in report["cases"] if c["message"]}:
        assert flat.count(" ".join(message.split())) == 1, message


def test_check_skip_leaves_out_the_named_checks(capsys):
    code, document = run_main(
        capsys,
        "check",
        "ext_add_kernel.add",
        "--backends",
        "cpu",
        "--skip",
        "views,nvrtc",
        "--json",
    )
    checks = {c["check"] for c in json.loads(document)["cases"]}
    assert code == 0 and "views" not in checks and "nvrtc" not in checks
    assert {"values", "inputs", "sessions", "compile"} <= checks


def test_check_failures_only_lists_failed_cases_and_counts_all(capsys):
    code, document = run_main(
        capsys, "check", "ext_add_kernel.add", "--backends", "cpu", "--failures-only", "--json"
    )
    report = json.loads(document)
    assert code == 0 and report["cases"] == [] and report["summary"]["passed"] > 0
    code, out = run_main(capsys, "check", "ext_add_kernel.add", "--failures-only")
    assert code == 0 and not [line for line in out.splitlines() if line.startswith("│")]
    assert "Conformance: " in out and " passed" in out


@pytest.mark.parametrize(
    ("option", "given", "known"),
    [
        ("--backends", "cpu,bogus", "cpu, cuda, rocm, webgpu"),
        ("--variants", "cpu,bogus", "cpu, cuda-raw, dsl"),
        ("--skip", "views,bogus", "values, views, inputs, sessions, nvrtc, compile, launch-args"),
    ],
)
def test_check_refuses_an_unknown_name_naming_the_known_ones(capsys, option, given, known):
    code = main(["check", "ext_add_kernel.add", option, given])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{option} bogus: no such name; the known ones are " in err
    assert known in err


def test_plugin_code_paths_are_whole_and_relative_under_the_working_directory(
    tmp_path, monkeypatch
):
    """A checkout deep in the file system (CI's) gave 83-column lines: a module file under the
    working directory is shown relative to it; one elsewhere stays whole, never folded."""
    from tenferro_host._cli._caps import _shown_path

    monkeypatch.chdir(tmp_path)
    inside = tmp_path / "plugins" / "tenferro_host_cuda" / "__init__.py"
    assert _shown_path(str(inside)) == str(Path("plugins", "tenferro_host_cuda", "__init__.py"))
    outside = "/opt/" + "d" * 90 + "/plugin.py"
    assert _shown_path(outside) == outside

"""The benchmark suite's machinery: sampling, not-run rows, target verdicts, the report files.

No timed assertion: the figures are whatever this machine measures; what is checked is that
every row is reported (measured, not run with its reason, or failed with its error) and that
verdicts follow the numbers.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
from typing import Any

import pytest

from tenferro_host import benchmarks
from tenferro_host.benchmarks import baselines, cases, report
from tenferro_host.benchmarks.timing import Case, Group, Result, measure, try_case


def test_measure_reports_every_case_whatever_happens():
    calls = []

    def boom():
        raise RuntimeError("broken baseline")

    group = Group(
        "g",
        "a group",
        [
            Case("ok", lambda: calls.append(1)),
            Case("boom", boom),
            Case("absent", None, "not installed: x"),
        ],
        rounds=3,
        batch=4,
    )
    steps = []
    rows = {r.name: r for r in measure(group, lambda: steps.append(1))}
    assert rows["ok"].status == "ok" and rows["ok"].samples == 3 and rows["ok"].median > 0
    assert len(calls) == 4 * (1 + 3)  # one warm-up batch, then one batch per round
    assert rows["boom"].status == "failed" and "broken baseline" in rows["boom"].note
    assert rows["absent"].status == "not run" and rows["absent"].note == "not installed: x"
    assert len(steps) == 3


def test_a_setup_that_raises_is_a_failed_row_for_ours_and_not_run_for_a_baseline():
    def broken() -> Any:
        raise RuntimeError("cudagraph pool not tracked")

    group = Group(
        "g",
        "setups",
        [try_case("ours", broken, ours=True), try_case("baseline", broken)],
        rounds=1,
        batch=1,
    )
    rows = {r.name: r for r in measure(group)}
    assert rows["ours"].status == "failed" and "cudagraph pool" in rows["ours"].note
    assert rows["baseline"].status == "not run" and "cudagraph pool" in rows["baseline"].note


def test_a_verdict_and_its_table_line():
    met = report.verdict("host.run", 1.2, "<=", 1.5)
    missed = report.verdict("sum vs cupy", 0.9, ">=", 0.98)
    absolute = report.verdict("first call above the floor", 1.5, "<=", 1, " ms")
    unmeasured = report.verdict("graph", None, "<=", 1.05)
    assert (met["verdict"], missed["verdict"], unmeasured["verdict"]) == (
        "met",
        "missed",
        "not measured",
    )
    assert missed["by"] == pytest.approx(0.9 / 0.98)
    assert report.target_table([met, missed, absolute, unmeasured])[2:] == [
        "| host.run | <= 1.5x | 1.2x | met |",
        "| sum vs cupy | >= 0.98x | 0.9x | missed (by 0.92x) |",
        "| first call above the floor | <= 1 ms | 1.5 ms | missed (by 1.50x) |",
        "| graph | <= 1.05x | — | not measured |",
    ]


def test_bandwidth_rows_are_bytes_per_second():
    group = Group(
        "g",
        "bw",
        [Case("copy", lambda: None, nbytes=10**9)],
        unit="GB/s",
        rounds=2,
        batch=1,
        sync_in_timing=True,
    )
    (row,) = measure(group)
    assert row.median > 1  # 1 GB in far less than a second


def result(group, name, median, status="ok"):
    return Result(group, name, "us", status, median, median, median, 1)


def test_targets_are_ratios_to_the_baseline_of_the_same_run():
    rows = [
        result("cuda", cases.C_FLOOR, 4.0),
        result("cuda", cases.CORE_LAUNCH, 5.0),
        result("cuda", cases.HOST_RUN_RAW, 5.0),
        result("cuda", cases.HANDLE_RAW, 8.0),
        result("cuda", cases.HOST_RUN_RAW_PY, 7.0),
        result("cpu", cases.CPU_HOST_RUN, 2.0),
    ]
    verdicts = {(t["row"], t["versus"]): t for t in report.evaluate(rows)}
    compiled = verdicts[cases.HOST_RUN_RAW, cases.CORE_LAUNCH]
    assert compiled["verdict"] == "met" and compiled["value"] == pytest.approx(1.0)
    floor = verdicts[cases.HOST_RUN_RAW, cases.C_FLOOR]
    assert floor["verdict"] == "met" and floor["value"] == pytest.approx(1.25)
    assert verdicts[cases.HOST_RUN_RAW_PY, cases.CORE_LAUNCH]["verdict"] == "met"  # 1.4 <= 1.4
    missed = verdicts[cases.HANDLE_RAW, cases.CORE_LAUNCH]
    assert missed["verdict"] == "missed" and missed["by"] == pytest.approx(1.6 / 0.9)
    assert verdicts[cases.CPU_HOST_RUN, None]["verdict"] == "met"  # absolute: 2 µs <= 2 µs
    assert verdicts[cases.RAW_SESSION, cases.CORE_LAUNCH]["verdict"] == "not measured"
    assert verdicts[cases.BW_DSL, cases.BW_SEAM]["verdict"] == "not measured"


def test_a_quick_cpu_run_writes_report_json_and_chart(tmp_path):
    path = tmp_path / "docs" / "performance.md"
    done = benchmarks.run(quick=True, report_path=path, only=("cpu",))
    text = path.read_text()
    assert "## op call, CPU, 1024-element f32 add" in text
    assert cases.CPU_NUMPY in text and cases.CPU_HOST_RUN in text
    assert "| host.run on the CPU backend, 1k add (µs) | <= 2 |" in text
    data = json.loads(path.with_suffix(".json").read_text())
    assert data["schema_version"] == 1 and data["command"] == "tenferro-host bench"
    assert {r["name"] for r in data["results"]} == {
        cases.CPU_NUMPY,
        cases.CPU_HOST_RUN,
        cases.CPU_HANDLE,
        cases.CPU_HOST_RUN_PY,
        cases.CPU_HANDLE_PY,
        *cases.CPU_PLAN_ROWS,
    }
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "chart not written: matplotlib missing" in text
    else:
        assert path.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
        assert str(path.with_suffix(".png")) in done["files"]


def test_unavailable_backends_list_their_rows_as_not_run(host, monkeypatch):
    from contextlib import ExitStack

    from tenferro_host.provider._registry import BackendStatus

    monkeypatch.setattr(
        host, "backend_status", lambda kind: BackendStatus(kind, False, f"no {kind} here")
    )
    with ExitStack() as stack:
        group = cases.cuda_op_call(host, stack, cases.Sizes.quick())
    assert [c.name for c in group.cases] == list(cases.CUDA_CALL_ROWS)
    assert all(
        c.fn is None and c.note == "backend cuda unavailable: no cuda here" for c in group.cases
    )


def test_the_bench_command_prints_the_targets_and_the_files(tmp_path, capsys):
    from tenferro_host._cli import main

    report_path = tmp_path / ("deep" * 20) / "perf.md"  # a path longer than a terminal line
    assert (
        main(
            [
                "bench",
                "--quick",
                "--only",
                "cpu",
                "--report",
                str(report_path),
                "--json",
                str(tmp_path / "out.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "targets" in out and f"wrote {report_path}" in out
    assert json.loads((tmp_path / "out.json").read_text())["command"].startswith(
        "tenferro-host bench --quick --only cpu"
    )


def test_an_unknown_group_is_a_usage_error(capsys):
    from tenferro_host._cli import main

    assert main(["bench", "--only", "gpu"]) == 2
    assert "no benchmark group 'gpu'; the groups are cpu, webgpu, cuda" in capsys.readouterr().err


@pytest.mark.parametrize("which", ["--report", "--json"])
def test_an_unwritable_output_is_a_usage_error_before_any_measurement(
    tmp_path, capsys, monkeypatch, which
):
    from tenferro_host import benchmarks
    from tenferro_host._cli import main

    def measure(**_kwargs):
        raise AssertionError("bench measured before checking where it writes")

    monkeypatch.setattr(benchmarks, "run", measure)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    paths = {"--report": str(tmp_path / "perf.md"), "--json": str(tmp_path / "out.json")}
    paths[which] = str(blocker / "sub" / "x.out")  # its directory cannot be made
    argv = ["bench", "--quick", "--only", "cpu"]
    assert main(argv + [item for pair in paths.items() for item in pair]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tenferro-host: error: {which} {blocker / 'sub' / 'x.out'} cannot be")
    assert err.count("\n") == 1
    assert main([*argv, "--report", str(tmp_path)]) == 2  # a directory is no report file
    assert f"--report {tmp_path} is a directory" in capsys.readouterr().err


class _NumbaForOlderNumpy(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``numba`` whose ``numba.cuda`` raises numba-cuda 0.30.4's error under numpy 2.5 (there at
    the first compile), found before any installed numba (and numba-cuda's own redirection)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in ("numba", "numba.cuda"):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=name == "numba")

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        if module.__name__ == "numba.cuda":
            raise AttributeError("module 'numpy' has no attribute 'row_stack'")


def test_a_numba_cuda_that_does_not_import_with_this_numpy_says_why(tmp_path, monkeypatch):
    """numba-cuda 0.30.4 registers ``np.row_stack`` (on its first compile), which numpy 2.5
    removed: the numba row is not run, naming both versions and the missing attribute."""
    info = tmp_path / "numba_cuda-0.30.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numba-cuda\nVersion: 0.30.4\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", [_NumbaForOlderNumpy(), *sys.meta_path])
    for name in [m for m in sys.modules if m == "numba" or m.startswith("numba.")]:
        monkeypatch.delitem(sys.modules, name)
    case = try_case("numba-cuda add", lambda: baselines.numba_add([]))
    assert case.fn is None and not case.failed
    assert "numba-cuda 0.30.4 fails with numpy" in case.note
    assert "row_stack" in case.note

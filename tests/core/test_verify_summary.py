"""The summary ``scripts/gpu-verify`` prints (``tenferro_host.benchmarks.verify_summary``),
from a work directory as its steps leave it: test counts and each failure's first line, each
step's result (timed out, skipped for the budget, a failed bench row) and every bench's target
table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tenferro_host.benchmarks import verify_summary
from tenferro_host.benchmarks.report import verdict

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.cuda.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.cuda.test_a" name="test_bad" time="0.1">
  <failure message="AssertionError: assert 3 == 4&#10;  where 3 = f()">long traceback</failure>
</testcase>
<testcase classname="tests.cuda.test_b" name="test_setup" time="0.1">
  <error message="">&#10;fixture 'rt' failed: OutOfMemoryError&#10;more</error>
</testcase>
<testcase classname="tests.cuda.test_b" name="test_skip" time="0">
  <skipped message="no GPU"/>
</testcase>
</testsuite></testsuites>
"""

STEPS = (
    "step\trc\tseconds\tcap\tfile",
    "tests\t1\t180\t300\ttests.xml",
    "tests-alone\t0\t4\t60\ttests-alone.xml",
    "frameworks_bench\t1\t70\t90\tframeworks_bench.json",
    "first_call\t124\t45\t45\tfirst_call.json",
    "capture_bench\tskipped\t0\t3\tcapture_bench.json",
)


def _work(tmp_path: Path, steps: tuple[str, ...] = STEPS) -> Path:
    (tmp_path / "steps.tsv").write_text("\n".join(steps) + "\n")
    (tmp_path / "tests.xml").write_text(JUNIT)
    alone = '<testsuite><testcase classname="tests.r" name="test_fill"/></testsuite>'
    (tmp_path / "tests-alone.xml").write_text(alone)
    bench = {
        "results": [
            {"name": "torch.add", "status": "ok"},
            {"name": "exported add, reduce-overhead", "status": "failed", "note": "RuntimeError"},
        ],
        "targets": [verdict("exported add eager vs torch.add", 1.1, "<=", 1.3)],
    }
    (tmp_path / "frameworks_bench.json").write_text(json.dumps(bench))
    (tmp_path / "first_call.log").write_text("fresh processes\nruns 3/5\n\n")
    return tmp_path


def test_counts_failures_steps_and_targets(tmp_path: Path) -> None:
    text, ok = verify_summary.summary(_work(tmp_path), 300, 540)
    assert not ok
    assert "| tests | 1 passed, 1 failed, 1 errors, 1 skipped | 180 (300) |" in text
    assert "| tests-alone | 1 passed, 0 failed, 0 errors, 0 skipped | 4 (60) |" in text
    assert "- tests.cuda.test_a::test_bad: AssertionError: assert 3 == 4" in text
    assert "- tests.cuda.test_b::test_setup: fixture 'rt' failed: OutOfMemoryError" in text
    assert "- frameworks_bench: exported add, reduce-overhead: RuntimeError" in text
    assert "| frameworks_bench | exit 1; 1 failed rows | 70 (90) |" in text
    timed_out = "timed out at its cap of 45 s; no first_call.json (first_call.log ends: runs 3/5)"
    assert f"| first_call | {timed_out} | 45 (45) |" in text
    assert "| capture_bench | not run: the budget was spent | 0 (3) |" in text
    assert "## Failures (3)" in text
    assert "| exported add eager vs torch.add | <= 1.3x | 1.1x | met |" in text


def test_a_clean_run_passes_even_with_a_missed_target(tmp_path: Path) -> None:
    work = _work(tmp_path, (STEPS[0], "tests-alone\t0\t4\t60\ttests-alone.xml"))
    bench = {"targets": [verdict("sum vs cupy.sum", 0.9, ">=", 0.98)]}
    (work / "dsl.json").write_text(json.dumps(bench))
    with open(work / "steps.tsv", "a") as fh:
        fh.write("dsl_vs_cupy\t0\t30\t90\tdsl.json\n")
    text, ok = verify_summary.summary(work, 40, 540)
    assert ok, text
    assert "| sum vs cupy.sum | >= 0.98x | 0.9x | missed (by 0.92x) |" in text
    assert "## Failures (0)" in text


def test_the_script_prints_the_summary_and_exits_1_on_a_failure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", verify_summary.__name__, str(_work(tmp_path)), "300", "540"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("# gpu-verify: 300 s of a 540 s budget")


def test_a_step_whose_log_is_its_result_reports_the_sanitizer_summary(tmp_path: Path) -> None:
    work = _work(tmp_path, (STEPS[0], "sanitizer\t0\t20\t60\tsanitizer.log"))
    (work / "sanitizer.log").write_text(
        "========= COMPUTE-SANITIZER\n3 passed\n========= ERROR SUMMARY: 0 errors\n"
    )
    text, ok = verify_summary.summary(work, 40, 540)
    assert ok
    assert "| sanitizer | ok; ========= ERROR SUMMARY: 0 errors | 20 (60) |" in text
    (work / "steps.tsv").write_text(f"{STEPS[0]}\nsanitizer\t3\t20\t60\tsanitizer.log\n")
    (work / "sanitizer.log").write_text("========= ERROR SUMMARY: 2 errors\n")
    text, ok = verify_summary.summary(work, 40, 540)
    assert not ok and "| sanitizer | exit 3; ========= ERROR SUMMARY: 2 errors |" in text

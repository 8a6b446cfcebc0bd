"""The one-screen summary of a ``scripts/gpu-verify`` run, from what its steps left in its
work directory: ``steps.tsv`` (each step's exit code, seconds, cap and result file), the test
steps' JUnit XML and the benches' JSON (each with a ``targets`` list, as
``tenferro_host.benchmarks.report.verdict`` writes them).

    python -m tenferro_host.benchmarks.verify_summary WORK WALL_S BUDGET_S > summary.md

Prints the markdown summary; exits 1 when a test or a step failed, else 0 (a missed target is
reported, never a failure of the run).
"""

from __future__ import annotations

import csv
import json
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .report import target_table

#: Failures listed in full; the rest are counted (every one is in the archive's logs).
MAX_FAILURES = 25


@dataclass
class TestCounts:
    """What one JUnit file says: counts, and each failure or error with its first line."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)


def junit(path: Path) -> TestCounts:
    """The counts and problems of a pytest ``--junitxml`` file."""
    counts = TestCounts()
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if outcome is None:
            counts.passed += 1
        elif outcome.tag == "skipped":
            counts.skipped += 1
        else:
            counts.failed += outcome.tag == "failure"
            counts.errors += outcome.tag == "error"
            counts.problems.append(f"{name}: {first_line(outcome)}")
    return counts


def first_line(outcome: ET.Element) -> str:
    """The first non-empty line of a failure's message, else of its text."""
    for text in (outcome.get("message"), outcome.text):
        line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
        if line:
            return line[:200]
    return "(no message)"


def last_line(log: Path) -> str:
    """A step's last line of output: why it left no result."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return next((ln.strip()[:160] for ln in reversed(lines) if ln.strip()), "nothing")


def failed_rows(doc: Any) -> list[str]:
    """The rows a bench's JSON reports failed: ``status`` failed (with its ``note``) or a wrong
    result, or a ``failed`` error."""
    if not isinstance(doc, dict):
        return []
    out = []
    for row in doc.get("results") or doc.get("rows") or []:
        name = row.get("name") or row.get("row") or row.get("variant") or "?"
        status = str(row.get("status", ""))
        if status == "failed":
            out.append(f"{name}: {row.get('note', '')}"[:200])
        elif status.startswith("WRONG"):
            out.append(f"{name}: {status}"[:200])
        elif "failed" in row:
            out.append(f"{name}: {row['failed']}"[:200])
    return out


def summary(work: Path, wall: int, budget: int) -> tuple[str, bool]:
    """The summary's markdown, and whether every test and step passed."""
    with open(work / "steps.tsv") as fh:
        steps = list(csv.DictReader(fh, delimiter="\t"))
    lines = [f"# gpu-verify: {wall} s of a {budget} s budget", ""]
    versions = work / "versions.txt"
    if versions.exists():
        lines += ["    " + ln for ln in versions.read_text().splitlines()[:3]] + [""]
    lines += ["| step | result | s (cap) |", "|---|---|---|"]
    ok = True
    problems: list[str] = []
    tables: list[tuple[str, list[dict[str, Any]]]] = []
    for s in steps:
        name, rc, result = s["step"], s["rc"], Path(work / s["file"])
        if rc == "skipped":
            verdict = "not run: the budget was spent"
        elif rc in ("124", "137"):
            verdict = f"timed out at its cap of {s['cap']} s"
        else:
            verdict = "ok" if rc == "0" else f"exit {rc}"
        if result.suffix == ".xml" and result.exists():
            t = junit(result)
            verdict = (
                f"{t.passed} passed, {t.failed} failed, {t.errors} errors, {t.skipped} skipped"
                + ("" if rc in ("0", "1") else f"; {verdict}")
            )
            problems += t.problems
            ok &= rc == "0" and not t.problems
        elif result.suffix == ".json" and result.exists():
            doc = json.loads(result.read_text())
            rows = failed_rows(doc)
            problems += [f"{name}: {row}" for row in rows]
            if rows:
                verdict += f"; {len(rows)} failed rows"
            tables.append((name, doc.get("targets", []) if isinstance(doc, dict) else []))
            ok &= rc == "0"
        elif result.suffix == ".log" and result.exists():  # a step whose log is its result
            summary = [ln for ln in result.read_text().splitlines() if "ERROR SUMMARY" in ln]
            verdict += f"; {summary[-1].strip() if summary else last_line(result)}"
            ok &= rc == "0"
        else:
            if rc != "skipped":
                verdict += (
                    f"; no {result.name} ({name}.log ends: {last_line(work / f'{name}.log')})"
                )
            ok = False
        lines.append(f"| {name} | {verdict} | {s['seconds']} ({s['cap']}) |")
    lines += ["", f"## Failures ({len(problems)})", ""]
    lines += [f"- {p}" for p in problems[:MAX_FAILURES]]
    if len(problems) > MAX_FAILURES:
        lines.append(f"- ... and {len(problems) - MAX_FAILURES} more (the logs in the archive)")
    for name, targets in tables:
        lines += ["", f"## Targets: {name}", ""]
        lines += target_table(targets) if targets else ["(no targets reported)"]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str]) -> int:
    """Print the summary of ``WORK WALL_S BUDGET_S``; 1 when a test or a step failed."""
    text, ok = summary(Path(argv[0]), int(argv[1]), int(argv[2]))
    sys.stdout.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The report of a benchmark run: targets met or missed, tables, JSON and a chart.

Each target is a ratio against a baseline measured in the same run (or an absolute bound);
one whose rows did not run is listed as *not measured*, never as met.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cases as c
from .timing import Result

#: HBM3e peak of the H200, the machine the report is made on.
HBM_PEAK_GBS = 4800.0


@dataclass(frozen=True)
class Target:
    """``row`` (of ``group``) against ``versus`` (None: an absolute bound in the row's unit)."""

    group: str
    row: str
    versus: str | None
    op: str  # "<=" | ">="
    bound: float
    label: str


TARGETS = (
    Target("cuda", c.HOST_RUN_RAW, c.CORE_LAUNCH, "<=", 1.0, "host.run cuda-raw (compiled call)"),
    Target("cuda", c.HOST_RUN_RAW, c.C_FLOOR, "<=", 1.4, "the same against the C floor"),
    Target("cuda", c.HANDLE_RAW, c.CORE_LAUNCH, "<=", 0.9, "the same through an op handle"),
    Target("cuda", c.HOST_RUN_DSL, c.CORE_LAUNCH, "<=", 1.1, "a DSL op on CUDA through host.run"),
    Target("cuda", c.HOST_RUN_RAW_PY, c.CORE_LAUNCH, "<=", 1.4, "host.run cuda-raw, pure Python"),
    Target("cuda", c.HANDLE_RAW_PY, c.CORE_LAUNCH, "<=", 1.3, "its op handle, pure Python"),
    Target("cuda", c.HOST_RUN_DSL_PY, c.CORE_LAUNCH, "<=", 1.5, "a DSL op, pure Python"),
    Target("cuda", c.RAW_SESSION, c.CORE_LAUNCH, "<=", 0.4, "raw session enter + exit"),
    Target("cuda", c.ALLOC_OUTPUT, c.CP_EMPTY, "<=", 1.0, "alloc_output vs CuPy's cp.empty"),
    Target("cuda", c.BORROW, None, "<=", 0.3, "tensor borrow (µs)"),
    Target("cuda", c.BORROW_MUT, None, "<=", 0.3, "tensor_mut borrow (µs)"),
    Target("cuda", c.RS_LAUNCH, c.CORE_LAUNCH, "<=", 1.2, "rs.launch(fn, cfg, args)"),
    Target(
        "cuda-bandwidth",
        c.BW_DSL,
        c.BW_SEAM,
        ">=",
        0.99,
        "DSL add bandwidth vs the hand-written add",
    ),
    Target(
        "cuda-bandwidth", c.BW_SEAM, c.BW_CUPY, ">=", 0.99, "seam add bandwidth vs CuPy's RawKernel"
    ),
    Target("cpu", c.CPU_HOST_RUN, None, "<=", 2.0, "host.run on the CPU backend, 1k add (µs)"),
    Target("cpu", c.CPU_HOST_RUN_PY, None, "<=", 4.0, "the same on the pure-Python call (µs)"),
    Target(
        "webgpu",
        c.WGPU_HOST_RUN,
        c.WGPU_DIRECT,
        "<=",
        1.3,
        "WebGPU host.run of the DSL add vs the bare wgpu-py dispatch",
    ),
)


def _find(results: list[Result], group: str, row: str) -> Result | None:
    for r in results:
        if r.group == group and r.name == row and r.status == "ok":
            return r
    return None


def verdict(
    label: str, value: float | None, op: str, bound: float, unit: str = "x"
) -> dict[str, Any]:
    """One target's entry: ``value`` (a ratio when ``unit`` is ``x``, else in the label's unit)
    met or missed against ``op bound`` (by how much), or not measured when ``value`` is None.
    Every bench writes its targets this way, so one table shows them all."""
    entry: dict[str, Any] = {
        "target": label,
        "bound": f"{op} {bound:g}{unit}",
        "unit": unit,
        "value": value,
    }
    if value is None:
        entry.update(verdict="not measured", by=None)
    else:
        met = value <= bound if op == "<=" else value >= bound
        entry.update(verdict="met" if met else "missed", by=None if met else value / bound)
    return entry


def evaluate(results: list[Result]) -> list[dict[str, Any]]:
    """Each target with its measured value, ratio and verdict (met / missed / not measured)."""
    out = []
    for t in TARGETS:
        row = _find(results, t.group, t.row)
        base = _find(results, t.group, t.versus) if t.versus else None
        value = None
        if row is not None and row.median is not None:
            if t.versus is None:
                value = row.median
            elif base is not None and base.median:
                value = row.median / base.median
        entry = verdict(t.label, value, t.op, t.bound, "x" if t.versus else "")
        out.append({**entry, "row": t.row, "versus": t.versus})
    return out


def target_table(targets: list[dict[str, Any]]) -> list[str]:
    """The targets as markdown table lines: target, bound, measured, verdict."""
    lines = ["| target | bound | measured | verdict |", "|---|---|---|---|"]
    for t in targets:
        value = "—" if t["value"] is None else f"{t['value']:.3g}{t['unit']}"
        shown = t["verdict"] + (f" (by {t['by']:.2f}x)" if t["verdict"] == "missed" else "")
        lines.append(f"| {t['target']} | {t['bound']} | {value} | {shown} |")
    return lines


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _baseline_of(group: str, results: list[Result]) -> Result | None:
    """The first measured row of a group is its baseline (the cases list it first)."""
    return next((r for r in results if r.group == group and r.status == "ok"), None)


def markdown(
    meta: dict[str, Any],
    groups: list[dict[str, Any]],
    results: list[Result],
    targets: list[dict[str, Any]],
    chart: str | None,
) -> str:
    """docs/performance.md: machine, versions, date, command, targets, every group's table."""
    lines = [
        "# Performance",
        "",
        "Written by `tenferro-host bench`; every figure is measured beside its baseline in "
        "one process, interleaved (each round times a batch of every case in turn); medians "
        "with the interquartile range. Targets are ratios against cuda.core's bare `launch` "
        "of the same add kernel in the same run unless stated otherwise.",
        "",
        f"- date: {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
    ]
    lines += [f"- {k}: {v}" for k, v in meta["versions"].items()]
    lines += ["", "## Targets", "", *target_table(targets)]
    for g in groups:
        rows = [r for r in results if r.group == g["key"]]
        unit = g["unit"]
        base = _baseline_of(g["key"], rows)
        lines += ["", f"## {g['title']}", ""]
        lines += [f"{note}." for note in g["notes"]] + ([""] if g["notes"] else [])
        reasons = {r.note for r in rows if r.status == "not run"}
        if len(reasons) == 1 and all(r.status == "not run" for r in rows):
            lines += [f"Not run: {reasons.pop()}", "", ", ".join(r.name for r in rows) + "."]
            continue
        per = {"us": "µs per call", "ms": "ms per call", "GB/s": "GB/s"}[unit]
        extra = " | of 4.8 TB/s" if g["key"] == "cuda-bandwidth" else ""
        lines += [
            f"| call | {per} (median) | IQR | x {base.name if base else 'baseline'}{extra} |",
            "|---|---|---|---|" + ("---|" if extra else ""),
        ]
        for r in rows:
            if r.status != "ok":
                tail = " |" if extra else ""
                lines.append(f"| {r.name} | {r.status}: {r.note} | | |{tail}")
                continue
            ratio = f"{r.median / base.median:.2f}" if base and base.median and r.median else "—"
            iqr = f"{_fmt(r.q1, unit)}–{_fmt(r.q3, unit)}"  # noqa: RUF001 - an en dash for a range
            frac = f" | {r.median / HBM_PEAK_GBS:.3f}" if extra and r.median else ""
            lines.append(f"| {r.name} | {_fmt(r.median, unit)} | {iqr} | {ratio}{frac} |")
    profiled = [r for r in results if r.calls_per_op is not None]
    if profiled:
        lines += [
            "",
            "## Where the time goes (cProfile, after the timing)",
            "",
            "Python-level calls per call, and the functions with the most own time "
            "(calls per call, own µs per call under the profiler).",
            "",
        ]
        for r in profiled:
            top = "; ".join(f"`{name}` {n:.3g}x {us:.2f} µs" for name, n, us in r.profile_top)
            lines.append(f"- **{r.name}** ({r.group}): {r.calls_per_op:.0f} calls — {top}")
    if chart:
        lines += ["", f"![µs per call, log scale]({chart})"]
    else:
        lines += ["", f"(chart not written: {meta.get('chart_reason', 'matplotlib missing')})"]
    return "\n".join(lines) + "\n"


def write_json(
    path: Path, meta: dict[str, Any], results: list[Result], targets: list[dict[str, Any]]
) -> None:
    """Write the run's metadata, results and targets as JSON to ``path``."""
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                **meta,
                "results": [r.as_dict() for r in results],
                "targets": targets,
            },
            indent=2,
        )
        + "\n"
    )


def write_chart(path: Path, groups: list[dict[str, Any]], results: list[Result]) -> str | None:
    """Grouped horizontal bars of µs per call (log axis), one colour per group; returns why
    not when matplotlib is missing (or None when written)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing"
    try:
        return _draw(plt, path, groups, results)
    except Exception as exc:  # a broken matplotlib install must not lose the measurements
        return f"matplotlib failed: {type(exc).__name__}: {exc}"


def _draw(plt: Any, path: Path, groups: list[dict[str, Any]], results: list[Result]) -> str | None:
    per_call = [g for g in groups if g["unit"] == "us"]
    rows = [
        (g, r)
        for g in per_call
        for r in results
        if r.group == g["key"] and r.status == "ok" and r.median
    ]
    if not rows:
        return "no per-call figure was measured"
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (g, r) in enumerate(rows):
        colour = colours[per_call.index(g) % len(colours)]
        label = g["title"] if all(h is not g for h, _ in rows[:i]) else None
        ax.barh(i, float(r.median or 0), color=colour, label=label)
    ax.set_yticks(range(len(rows)), [r.name for _, r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs per call (median, log scale)")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return None


__all__ = [
    "HBM_PEAK_GBS",
    "TARGETS",
    "Target",
    "evaluate",
    "markdown",
    "target_table",
    "verdict",
    "write_chart",
    "write_json",
]

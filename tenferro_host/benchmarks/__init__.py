"""The benchmark suite behind ``tenferro-host bench``: the op call against every peer.

One process, every figure beside its baseline (cuda.core, CuPy, torch, Triton, cupyx.jit,
numba-cuda, numpy, wgpu-py where installed), interleaved repetitions, medians and spreads.
:func:`run` measures every group of :mod:`.cases` and writes the report (markdown), its JSON
and a chart (PNG, when matplotlib is installed) side by side.
"""

from __future__ import annotations

import datetime
import platform
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from .._host import Host
from . import report
from .cases import GROUPS, Sizes
from .timing import Case, Group, Result, measure

VERSIONED = (
    "tenferro-host",
    "ext-add-kernel",
    "numpy",
    "cuda-core",
    "cuda-bindings",
    "nvidia-cuda-nvrtc",
    "cupy-cuda13x",
    "cupy-cuda12x",
    "torch",
    "triton",
    "numba-cuda",
    "jax",
    "wgpu",
    "matplotlib",
)


def versions() -> dict[str, str]:
    """Python and every package a row depends on (``not installed`` where missing)."""
    found = {"python": sys.version.split()[0]}
    for dist in VERSIONED:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            if not dist.startswith("cupy-"):
                found[dist] = "not installed"
    return found


def machine(host: Host) -> str:
    """CPU, and each available backend's device."""
    parts = [
        f"{platform.machine()} {platform.processor() or ''}".strip(),
        f"{platform.system()} {platform.release()}",
    ]
    for status in host.backend_statuses():
        if status.available and status.devices:
            names = ", ".join(str(d.get("name", "?")) for d in status.devices)
            parts.append(f"{status.kind}: {names}")
    return "; ".join(parts)


def measure_all(
    host: Host,
    sizes: Sizes,
    progress: Callable[[str, int], Callable[[], None]],
    only: tuple[str, ...] = (),
) -> tuple[list[Group], list[Result]]:
    """Build and measure each group (its sessions closed after it); ``progress(title, steps)``
    returns the callback advanced once per sample."""
    groups: list[Group] = []
    results: list[Result] = []
    for key, build in GROUPS.items():
        if only and key not in only:
            continue
        with ExitStack() as stack:
            try:
                group = build(host, stack, sizes)
            except Exception as exc:  # the group's own setup failed: its rows say why
                why = f"setup failed: {type(exc).__name__}: {exc}"[:300]
                group = Group(key, build.__name__, [Case(build.__name__, None, why)])
            steps = group.rounds * sum(1 for c in group.cases if c.fn is not None)
            results += measure(group, progress(group.title, steps))
            # Keep what the report needs, not the cases: their tensors are freed here.
            groups.append(Group(group.key, group.title, [], unit=group.unit, notes=group.notes))
    return groups, results


def run(
    *,
    quick: bool = False,
    report_path: Path,
    json_path: Path | None = None,
    command: str = "tenferro-host bench",
    only: tuple[str, ...] = (),
    console: Any = None,
) -> dict[str, Any]:
    """Measure everything and write the report, the JSON and the chart; return the JSON data."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = console or Console(stderr=True)
    host = Host()
    sizes = Sizes.quick() if quick else Sizes()
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        tasks: list[Any] = []

        def progress(title: str, steps: int) -> Callable[[], None]:
            if tasks:
                bar.update(tasks[-1], completed=bar.tasks[-1].total)
            task = bar.add_task(title, total=max(steps, 1))
            tasks.append(task)
            return lambda: bar.advance(task)

        groups, results = measure_all(host, sizes, progress, only)
        if tasks:
            bar.update(tasks[-1], completed=bar.tasks[-1].total)
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "machine": machine(host),
        "versions": versions(),
        "sizes": replace(sizes).__dict__,
    }
    targets = report.evaluate(results)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    chart_path = report_path.with_suffix(".png")
    why_not = report.write_chart(chart_path, [_group_meta(g) for g in groups], results)
    if why_not:
        meta["chart_reason"] = why_not
        console.print(f"chart not written: {why_not}")
    group_meta = [_group_meta(g) for g in groups]
    report_path.write_text(
        report.markdown(meta, group_meta, results, targets, None if why_not else chart_path.name)
    )
    json_path = json_path or report_path.with_suffix(".json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    report.write_json(json_path, meta, results, targets)
    return {
        "meta": meta,
        "results": results,
        "targets": targets,
        "files": [str(report_path), str(json_path)] + ([] if why_not else [str(chart_path)]),
    }


def _group_meta(g: Group) -> dict[str, Any]:
    return {"key": g.key, "title": g.title, "unit": g.unit, "notes": g.notes}


__all__ = ["Sizes", "measure_all", "run", "versions"]

"""Interleaved sampling: every case of a group is timed in turn, round after round.

Interleaving keeps machine noise (clock changes, other processes) from favouring one case; a
round times ``batch`` calls of each case. Per-call host cost is measured with the group's sync
outside the timed region (so the launch queue never fills); bandwidth includes it (the device
work is what is measured). Results are medians with the interquartile range as the spread.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Case:
    """One measured call; ``fn`` is None when it cannot run here (``note`` says why)."""

    name: str
    fn: Callable[[], Any] | None
    note: str = ""
    #: bytes moved per call, for a bandwidth row (GB/s instead of µs)
    nbytes: int = 0
    #: ``fn`` is None because the measured code itself failed to set up: a failed row
    failed: bool = False
    #: what each timed batch (and the profile) runs inside, e.g. the pure-Python call switched on
    within: Callable[[], AbstractContextManager[Any]] = nullcontext
    #: calls ``fn`` makes of what the row names (a C loop of launches: one Python call per batch)
    per_call: int = 1


@dataclass
class Group:
    """Cases measured together: same sync, batch, rounds and unit."""

    key: str
    title: str
    cases: list[Case]
    sync: Callable[[], None] = lambda: None
    unit: str = "us"  # "us" per call, "GB/s", or "ms" per call
    batch: int = 200
    rounds: int = 20
    sync_in_timing: bool = False
    notes: list[str] = field(default_factory=list)
    #: cases whose Python-level calls are counted after the timing (cProfile)
    profiled: tuple[str, ...] = ()


@dataclass
class Result:
    """One row of the report."""

    group: str
    name: str
    unit: str
    status: str  # "ok" | "not run" | "failed"
    median: float | None = None
    q1: float | None = None
    q3: float | None = None
    samples: int = 0
    note: str = ""
    #: Python-level calls per call and the functions with the most own time (profiled rows)
    calls_per_op: float | None = None
    profile_top: list[tuple[str, float, float]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (for the JSON report)."""
        return dict(self.__dict__)


def _sample(case: Case, group: Group) -> float:
    """Seconds per call over one batch."""
    fn = case.fn
    assert fn is not None
    batch = group.batch
    with case.within():
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        if group.sync_in_timing:
            group.sync()
        t1 = time.perf_counter()
    if not group.sync_in_timing:
        group.sync()
    return (t1 - t0) / batch / case.per_call


def _value(seconds: float, case: Case, unit: str) -> float:
    if unit == "GB/s":
        return case.nbytes / seconds / 1e9
    return seconds * (1e3 if unit == "ms" else 1e6)


def calls_counted(profiler: cProfile.Profile) -> int:
    """The calls ``profiler`` saw, each function's code its own. ``pstats`` keys a function by
    file, line and name, and the methods every dataclass generates share one key (``<string>``,
    line 2): its ``total_calls`` keeps one of them, which one depending on where their code lies
    in memory, so the same calls counted differently from one process to another."""
    return sum(entry.callcount for entry in profiler.getstats())


def profile(fn: Callable[[], Any], calls: int = 200, top: int = 8) -> tuple[float, list[Any]]:
    """Python-level calls per call of ``fn``, and the ``top`` functions by own time as
    (function, calls per call, own µs per call): what a missed target's time is made of."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, _ct, _callers) in table.items():
        where = f"{Path(filename).name}:{line}({name})" if line else name
        rows.append((where, ncalls / calls, tottime / calls * 1e6))
    rows.sort(key=lambda r: -r[2])
    return calls_counted(profiler) / calls, rows[:top]


def measure(group: Group, advance: Callable[[], None] = lambda: None) -> list[Result]:
    """Warm up each runnable case once, then ``rounds`` interleaved samples of each."""
    samples: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    live = [c for c in group.cases if c.fn is not None]
    for case in live:
        try:
            _sample(case, group)
            samples[case.name] = []
        except Exception as exc:  # a baseline library's failure is a row, never a crash
            errors[case.name] = f"{type(exc).__name__}: {exc}"
    live = [c for c in live if c.name in samples]
    for _ in range(group.rounds):
        for case in list(live):
            try:
                samples[case.name].append(_value(_sample(case, group), case, group.unit))
            except Exception as exc:
                errors[case.name] = f"{type(exc).__name__}: {exc}"
                live.remove(case)
            advance()
    results = []
    for case in group.cases:
        if case.fn is None:
            status = "failed" if case.failed else "not run"
            results.append(Result(group.key, case.name, group.unit, status, note=case.note))
        elif case.name in errors:
            results.append(
                Result(group.key, case.name, group.unit, "failed", note=errors[case.name][:300])
            )
        else:
            values = samples[case.name]
            q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
            result = Result(
                group.key,
                case.name,
                group.unit,
                "ok",
                statistics.median(values),
                q[0],
                q[2],
                len(values),
                case.note,
            )
            if case.name in group.profiled:
                try:
                    with case.within():
                        result.calls_per_op, result.profile_top = profile(case.fn)
                    group.sync()
                except Exception as exc:
                    result.note = f"profile failed: {type(exc).__name__}: {exc}"[:300]
            results.append(result)
    return results


def try_case(
    name: str, setup: Callable[[], Callable[[], Any]], nbytes: int = 0, ours: bool = False
) -> Case:
    """A case whose setup may fail: a missing or broken baseline library makes it not run; when
    the case measures ``ours`` (the project's code), a setup that raises makes it failed."""
    try:
        return Case(name, setup(), nbytes=nbytes)
    except ImportError as exc:
        return Case(name, None, f"not installed: {exc}", nbytes=nbytes)
    except Exception as exc:
        why = f"setup failed: {type(exc).__name__}: {exc}"[:300]
        return Case(name, None, why, nbytes=nbytes, failed=ours)


__all__ = ["Case", "Group", "Result", "calls_counted", "measure", "try_case"]

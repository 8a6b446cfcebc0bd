"""Timing and rows of the DSL-kernel benches (``bench/dsl_vs_cupy.py``,
``bench/webgpu_bandwidth.py``): a DSL kernel in a jit session against a CuPy call.

A sample is ``launches`` launches (in one jit session, or CuPy calls) followed by one
synchronize; a figure is the median of ``repeats`` samples, after one untimed sample (compile,
allocate, warm up). A row gives the rate of its work (GB/s, TFLOP/s) or why it did not run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from .. import cuda, webgpu

#: ``launch(js)``: one launch in the jit session ``js``.
Launch = Callable[[Any], None]


def exec_session(kind: str, session: Any) -> Any:
    """The exec session of ``session`` on backend kind ``kind`` (``cuda`` or ``webgpu``)."""
    return {"webgpu": webgpu.exec_session, "cuda": cuda.exec_session}[kind](session)


def launch_once(rt: Any, kind: str, name: str, launch: Launch) -> None:
    """One launch in a jit session of its own (an autotuned kernel's tuning, then a check)."""
    with rt.session() as s, exec_session(kind, s).jit(name) as js:
        launch(js)


def median_seconds(sample: Callable[[], float], repeats: int) -> float:
    """The median of ``repeats`` calls of ``sample``, after one untimed call."""
    sample()  # compile, allocate, warm up
    return statistics.median(sample() for _ in range(repeats))


def jit_samples(
    rt: Any, kind: str, name: str, launch: Launch, launches: int, repeats: int
) -> list[float]:
    """``repeats`` samples of seconds per launch of ``launch`` on ``rt`` (``launches`` in one
    jit session, then a synchronize), after one untimed sample."""

    def sample() -> float:
        with rt.session() as s:
            ex = exec_session(kind, s)
            start = time.perf_counter()
            with ex.jit(name) as js:
                for _ in range(launches):
                    launch(js)
            ex.synchronize()
            return (time.perf_counter() - start) / launches

    sample()  # compile, allocate, warm up
    return [sample() for _ in range(repeats)]


def jit_seconds(
    rt: Any, kind: str, name: str, launch: Launch, launches: int, repeats: int
) -> float:
    """The median of :func:`jit_samples`."""
    return statistics.median(jit_samples(rt, kind, name, launch, launches, repeats))


def cupy_seconds(fn: Callable[[], Any], launches: int, repeats: int) -> float:
    """Seconds per call of the CuPy call ``fn``, timed as :func:`jit_seconds` times launches."""
    import cupy  # the baseline's library: imported when a bench runs it

    return synced_seconds(fn, cupy.cuda.Device().synchronize, launches, repeats)


def torch_seconds(fn: Callable[[], Any], launches: int, repeats: int) -> float:
    """Seconds per call of the torch call ``fn`` on CUDA, timed as :func:`cupy_seconds`."""
    import torch  # the baseline's library: imported when a bench runs it

    return synced_seconds(fn, torch.cuda.synchronize, launches, repeats)


def synced_seconds(
    fn: Callable[[], Any], synchronize: Callable[[], Any], launches: int, repeats: int
) -> float:
    """Seconds per call of ``fn``: ``launches`` calls between two ``synchronize()``, the median
    of ``repeats`` such samples after an untimed one."""
    return median_seconds(partial(wall_seconds, fn, launches, synchronize), repeats)


def wall_seconds(fn: Callable[[], Any], batch: int, sync: Callable[[], Any]) -> float:
    """Wall seconds per call of ``fn`` over one batch, waited for before and after (throughput)."""
    sync()
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    sync()
    return (time.perf_counter() - t0) / batch


def row(
    name: str,
    variant: str,
    seconds: float | None,
    work: float,
    unit: str,
    reason: str | None = None,
) -> dict[str, Any]:
    """The row of ``variant`` of benchmark ``name``: ``work / seconds`` in ``unit``, or why not."""
    rate = None if seconds is None else work / seconds
    status = (
        "ok" if reason is None else reason if reason.startswith("WRONG") else (f"not run: {reason}")
    )
    return {
        "benchmark": name,
        "variant": variant,
        "status": status,
        "ms": None if seconds is None else seconds * 1e3,
        unit: rate,
    }


def run_variant(
    rows: list[dict[str, Any]],
    name: str,
    variant: str,
    work: float,
    unit: str,
    measure: Callable[[], float],
) -> None:
    """Append the row of ``measure()``; a wrong result or a failure is a row that says so."""
    try:
        rows.append(row(name, variant, measure(), work, unit))
    except AssertionError as exc:  # a wrong result: reported, never timed
        rows.append(row(name, variant, None, work, unit, f"WRONG RESULT: {exc}"))
    except Exception as exc:  # a missing library, a backend or adapter limit: the other rows run
        rows.append(row(name, variant, None, work, unit, f"{type(exc).__name__}: {exc}"))


__all__ = [
    "cupy_seconds",
    "exec_session",
    "jit_samples",
    "jit_seconds",
    "launch_once",
    "median_seconds",
    "row",
    "run_variant",
    "synced_seconds",
    "torch_seconds",
    "wall_seconds",
]

"""Shared by the launch-cost, linalg and profiling benches: interleaved timing of variants,
medians, output.

Each round times a batch of calls of every variant in turn; the result is each variant's median
over rounds. Interleaving keeps machine noise from favouring one variant. A batch is timed on
the host (:func:`per_launch_us`: the wait outside the timing, so the launch queue never fills)
or with the device (:func:`~tenferro_host.benchmarks.kernel_rows.wall_seconds`: waits on both
sides, for throughput).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any


def arguments(doc: str) -> argparse.Namespace:
    """``--rounds``, ``--batch`` and ``--json`` for a launch-cost bench."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--json", help="also write the results to this file")
    return parser.parse_args()


def per_launch_us(fn: Callable[[], Any], batch: int, sync: Callable[[], None]) -> float:
    """Host microseconds per call of ``fn`` over one batch (the sync is outside the timing)."""
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) / batch * 1e6


#: ``measure(fn, batch, sync)``: one batch's figure per call.
Measure = Callable[[Callable[[], Any], int, Callable[[], None]], float]


def interleaved(
    variants: Mapping[str, Callable[[], Any]],
    rounds: int,
    measure: Measure,
    batch: int,
    syncs: Mapping[str, Callable[[], None]],
) -> dict[str, float]:
    """One warm-up batch each, then ``rounds`` interleaved batches, each variant waited for by
    its own sync; the median ``measure`` of each."""
    for name, fn in variants.items():
        measure(fn, batch, syncs[name])
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(measure(fn, batch, syncs[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def interleaved_medians(
    variants: Mapping[str, Callable[[], None]], rounds: int, batch: int, sync: Callable[[], None]
) -> dict[str, float]:
    """:func:`interleaved` host µs per launch, every variant waited for by ``sync``."""
    return interleaved(variants, rounds, per_launch_us, batch, dict.fromkeys(variants, sync))


def print_rows(rows: Mapping[str, float], width: int, fmt: str) -> None:
    """Each row as ``  name value``, the name padded to ``width``, the value as ``fmt`` says
    (its unit included: ``"{:7.2f} us"``)."""
    for name, value in rows.items():
        print(f"  {name:{width}s} {fmt.format(value)}")


def write_json(path: str | None, medians: Mapping[str, float], ratios: Mapping[str, float]) -> None:
    """The medians and ratios as JSON, when ``--json`` named a file."""
    if path:
        with open(path, "w") as fh:
            json.dump({"medians_us": dict(medians), "ratios": dict(ratios)}, fh, indent=2)

"""Shared by the launch-cost benches: interleaved timing of launch variants, medians, output.

Each round times a batch of launches of every variant in turn and synchronizes outside the timed
region, so the launch queue never fills; the result is the median per-launch microseconds over
rounds. Interleaving keeps machine noise from favouring one variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Mapping


def arguments(doc: str) -> argparse.Namespace:
    """``--rounds``, ``--batch`` and ``--json`` for a launch-cost bench."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--json", help="also write the results to this file")
    return parser.parse_args()


def per_launch_us(fn: Callable[[], None], batch: int, sync: Callable[[], None]) -> float:
    """Host microseconds per call of ``fn`` over one batch (the sync is outside the timing)."""
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) / batch * 1e6


def interleaved_medians(
    variants: Mapping[str, Callable[[], None]], rounds: int, batch: int, sync: Callable[[], None]
) -> dict[str, float]:
    """One warm-up batch each, then ``rounds`` interleaved batches; median µs per launch."""
    for fn in variants.values():
        per_launch_us(fn, batch, sync)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(per_launch_us(fn, batch, sync))
    return {name: statistics.median(values) for name, values in samples.items()}


def write_json(path: str | None, medians: Mapping[str, float], ratios: Mapping[str, float]) -> None:
    """The medians and ratios as JSON, when ``--json`` named a file."""
    if path:
        with open(path, "w") as fh:
            json.dump({"medians_us": dict(medians), "ratios": dict(ratios)}, fh, indent=2)

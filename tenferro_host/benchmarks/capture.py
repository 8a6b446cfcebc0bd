"""Capture's bench rows (docs/capture.md): replays of captured add sessions against the same ops
eager through ``host.run`` and, on CUDA, against a raw cuda.core graph of the same kernels built
in the same process (the graph floor).

Rows, each per op (wall time including the device's, a synchronization per batch):

* replay of a captured 100-op session (a chain of 1k-element f32 adds);
* replay of a captured 10-op session, and of a 1-op one;
* replay of the 100-op session with every input pointer changed (two input sets alternating);
* replay of a 10-op chain of a DSL axpy whose ``a`` is a declared scalar: with the same value,
  and with a new value each replay (on CUDA's native graph: a parameter update per node);
* recaptures when only values change (a count; must be 0);
* the same 100 ops eager through ``host.run``;
* (CUDA) cuda.core's graph of 100 / 10 / 1 launches of the same kernel, ``graph.launch(stream)``.

A row that raises is reported failed with its error and the others run; the targets (the
capture issue's, with the floors on CUDA) are a table and the JSON's ``targets``.

    python bench/capture_bench.py [--backend cuda|webgpu|cpu] [--rounds 7] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import numpy as np

import tenferro_host as tf

from ..provider._capture import captures_opened
from .kernels import AXPY_OP, register_dsl_op
from .report import target_table, verdict

ADD = "ext_add_kernel.add"
N = 1024
#: The rows the targets read.
REPLAY_100 = "replay, captured 100-op session"
REPLAY_10 = "replay, captured 10-op session"
REPLAY_1 = "replay, captured 1-op session"
SCALAR_SAME = "replay, 10-op axpy chain, its declared scalar unchanged"
SCALAR_NEW = "replay, 10-op axpy chain, a new value of its declared scalar each time"
MOVED = "replay, every input pointer changed (100 ops)"
EAGER = "the same 100 ops eager (host.run)"
RECAPTURES = "recaptures when only values change"


def per_op(
    run: Callable[[], Any], sync: Callable[[], Any], ops: int, batch: int, rounds: int
) -> float:
    """Median over ``rounds`` of a batch's wall time per op, in µs (synchronized per batch)."""
    run()
    sync()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(batch):
            run()
        sync()
        samples.append((time.perf_counter() - start) / (batch * ops) * 1e6)
    return statistics.median(samples)


def capture_chain(rt: Any, op: str, a: tf.Tensor, b: tf.Tensor, ops: int) -> Any:
    """``ops`` calls of ``op``, each of the previous result and ``b`` (``a`` first), captured
    once on ``rt``: ``a`` and ``b`` the graph's inputs, the last result its output (the tests'
    chains too)."""
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = a
            for _ in range(ops):
                t = ex.run(op, t, b)
    return cap.graph(inputs=(a, b), outputs=(t,))


def scalar_chain(rt: Any, a: tf.Tensor, b: tf.Tensor, ops: int) -> Any:
    """``ops`` calls of the DSL axpy (``t = k * t + b``), ``k`` a declared scalar (1.0),
    captured once on ``rt``."""
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            k = cap.scalar("k", 1.0)
            t = a
            for _ in range(ops):
                t = ex.run(AXPY_OP, t, b, a=k)
    return cap.graph(inputs=(a, b), outputs=(t,))


def eager_chain(host: tf.Host, a: tf.Tensor, b: tf.Tensor, ops: int) -> tf.Tensor:
    """``ops`` adds through ``host.run``, each on the last one's result: the eager baseline."""
    t = a
    for _ in range(ops):
        t = host.run(ADD, t, b)
    return t


def core_graph(rt: Any, ptrs: list[int], ops: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """cuda.core's graph of ``ops`` launches of the add (``launch`` into a graph builder)."""
    from cuda.core import launch

    from tenferro_host.benchmarks.baselines import core_add

    stream, kernel, config = core_add(rt)
    builder = stream.create_graph_builder().begin_building()
    for _ in range(ops):
        launch(builder, config, kernel, *ptrs, np.int32(N))
    graph = builder.end_building().complete()
    return (lambda: graph.launch(stream)), stream.sync


def floor_row(ops: int) -> str:
    """The name of the row of cuda.core's graph of ``ops`` launches."""
    return f"cuda.core graph of {ops} launch{'es' if ops > 1 else ''} (floor)"


def _timed(row: str, measure: Callable[[], float], **about: Any) -> dict[str, Any]:
    """One row: µs per op, or the error that stopped it (the other rows still run)."""
    try:
        return {"row": row, "us_per_op": round(measure(), 3), **about}
    except Exception as exc:
        return {"row": row, "failed": f"{type(exc).__name__}: {exc}"[:300], **about}


def rows(backend: str, rounds: int) -> list[dict[str, Any]]:
    """Every row on ``backend``, each the median of ``rounds``; a row that raises says so."""
    host = tf.Host()
    register_dsl_op(host)
    rt = host.backend(backend)
    a, b = (rt.upload(np.full(N, v, np.float32)) for v in (1.0, 2.0))
    a2, b2 = (rt.upload(np.full(N, v, np.float32)) for v in (3.0, 4.0))
    eager_chain(host, a, b, 3)  # the warm-up a capture needs
    host.run(AXPY_OP, a, b, a=1.0)
    sync = rt.synchronize
    graphs: dict[int, Any] = {}

    def graph(ops: int) -> Any:
        """The captured ``ops``-op chain, made on first use and checked against eager calls."""
        if ops not in graphs:
            g = capture_chain(rt, ADD, a, b, ops)
            expected = eager_chain(host, a2, b2, ops).download()
            np.testing.assert_array_equal(g.replay(a2, b2).download(), expected)
            graphs[ops] = g
        return graphs[ops]

    flip = [0]

    def moved() -> None:
        flip[0] ^= 1
        graph(100).replay(*((a2, b2) if flip[0] else (a, b)))

    def form() -> str:
        return graphs[100].form if 100 in graphs else "not captured"

    report = [
        _timed(REPLAY_100, lambda: per_op(lambda: graph(100).replay(a, b), sync, 100, 20, rounds)),
        _timed(REPLAY_10, lambda: per_op(lambda: graph(10).replay(a, b), sync, 10, 200, rounds)),
        _timed(REPLAY_1, lambda: per_op(lambda: graph(1).replay(a, b), sync, 1, 1000, rounds)),
        _timed(MOVED, lambda: per_op(moved, sync, 100, 20, rounds)),
        _timed(EAGER, lambda: per_op(lambda: eager_chain(host, a, b, 100), sync, 100, 20, rounds)),
    ]
    for r in report:
        r.update(form=form(), backend=rt.name)
    report += scalar_rows(host, rt, (a, b), (a2, b2), rounds)
    try:
        opened = captures_opened()
        x = a2
        for _ in range(50):  # only values change: each replay's input holds new values
            x = host.run(ADD, x, b2)
            graph(100).replay(x, b2)
        report.append({"row": RECAPTURES, "count": captures_opened() - opened})
    except Exception as exc:
        report.append({"row": RECAPTURES, "failed": f"{type(exc).__name__}: {exc}"[:300]})
    if backend == "cuda":
        # a CUDA storage's device pointer (the SPI's Storage does not promise one)
        ptrs = [int(cast(Any, t.storage).ptr) for t in (rt.empty("float32", (N,)), a, b)]
        for ops, batch in ((100, 20), (10, 200), (1, 1000)):

            def floor(ops: int = ops, batch: int = batch) -> float:
                run, core_sync = core_graph(rt, ptrs, ops)
                return per_op(run, core_sync, ops, batch, rounds)

            report.append(_timed(floor_row(ops), floor))
    return report


def scalar_rows(
    host: tf.Host, rt: Any, ab: tuple[Any, Any], checked: tuple[Any, Any], rounds: int
) -> list[dict[str, Any]]:
    """The declared-scalar rows: the 10-op axpy chain (captured on first use and checked
    against eager calls on ``checked``) replayed with its scalar unchanged, then with a new
    value each replay."""
    made: list[Any] = []

    def graph() -> Any:
        if not made:
            g = scalar_chain(rt, *ab, 10)
            t, y = checked
            for _ in range(10):
                t = host.run(AXPY_OP, t, y, a=0.5)
            got = g.replay(*checked, k=0.5).download()
            np.testing.assert_allclose(got, t.download(), rtol=1e-5)
            made.append(g)
        return made[0]

    values = iter(np.linspace(0.5, 1.5, 1 << 20).tolist())
    runs: tuple[tuple[str, Callable[[], Any]], ...] = (
        (SCALAR_SAME, lambda: graph().replay(*ab, k=1.0)),
        (SCALAR_NEW, lambda: graph().replay(*ab, k=next(values))),
    )
    found = []
    for row, run in runs:
        timed = _timed(row, partial(per_op, run, rt.synchronize, 10, 200, rounds))
        timed.update(form=made[0].form if made else "not captured", backend=rt.name)
        if made and made[0].why_replayed:
            timed["why_replayed"] = made[0].why_replayed
        found.append(timed)
    return found


def targets(report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The capture issue's targets from this run's rows (the floors on CUDA only)."""
    value = {r["row"]: r.get("us_per_op", r.get("count")) for r in report if "failed" not in r}

    def ratio(row: str, versus: str) -> float | None:
        top, bottom = value.get(row), value.get(versus)
        return top / bottom if top is not None and bottom else None

    out = [
        verdict("recaptures when only values change", value.get(RECAPTURES), "<=", 0, ""),
        verdict("replay per op vs the same ops eager", ratio(REPLAY_100, EAGER), "<=", 0.8),
        verdict("every pointer changed vs unchanged", ratio(MOVED, REPLAY_100), "<=", 1.5),
    ]
    if any(r["row"].startswith("cuda.core graph") for r in report):
        floor = floor_row(100)
        out += [
            verdict("100-op replay vs cuda.core's graph", ratio(REPLAY_100, floor), "<=", 1.05),
            verdict("10-op replay, µs per op", value.get(REPLAY_10), "<=", 1.5, " µs"),
            verdict(
                "1-op replay vs cuda.core's graph of one launch",
                ratio(REPLAY_1, floor_row(1)),
                "<=",
                1.5,
            ),
        ]
    return out


def main() -> int:
    """Print the rows and the target table (and write the JSON); 1 when a row failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="cuda, webgpu or cpu (default: best)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    backend = args.backend or tf.Host().default_backend().split(":")[0]
    report = rows(backend, args.rounds)
    for r in report:
        value = r.get("us_per_op", r.get("count", r.get("failed")))
        print(f"{r['row']:<52} {value}")
    verdicts = targets(report)
    print("\n".join(target_table(verdicts)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": report, "targets": verdicts}, f, indent=2)
    return 1 if any("failed" in r for r in report) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Capture's bench rows (docs/capture.md): replays of captured add sessions against the same ops
eager through ``host.run`` and, on CUDA, against a raw cuda.core graph of the same kernels built
in the same process (the graph floor).

Rows, each per op (wall time including the device's, a synchronization per batch):

* replay of a captured 100-op session (a chain of 1k-element f32 adds);
* replay of a captured 10-op session;
* replay of the 100-op session with every input pointer changed (two input sets alternating);
* recaptures when only values change (a count; must be 0);
* the same 100 ops eager through ``host.run``;
* (CUDA) cuda.core's graph of 100 / 10 launches of the same kernel, ``graph.launch(stream)``.

    python bench/capture_bench.py [--backend cuda|webgpu|cpu] [--rounds 7] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_host as tf
from tenferro_host.provider._capture import captures_opened

ADD = "ext_add_kernel.add"
N = 1024


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


def capture_chain(host: tf.Host, rt: Any, a: tf.Tensor, b: tf.Tensor, ops: int) -> Any:
    """``ops`` adds, each of the previous result and ``b``, captured once."""
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = a
            for _ in range(ops):
                t = ex.run(ADD, t, b)
    return cap.graph(inputs=(a, b), outputs=(t,))


def eager_chain(host: tf.Host, a: tf.Tensor, b: tf.Tensor, ops: int) -> tf.Tensor:
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


def rows(backend: str, rounds: int) -> list[dict[str, Any]]:
    host = tf.Host()
    rt = host.backend(backend)
    a, b = (rt.upload(np.full(N, v, np.float32)) for v in (1.0, 2.0))
    a2, b2 = (rt.upload(np.full(N, v, np.float32)) for v in (3.0, 4.0))
    eager_chain(host, a, b, 3)  # the warm-up a capture needs
    g100, g10 = capture_chain(host, rt, a, b, 100), capture_chain(host, rt, a, b, 10)
    expected = eager_chain(host, a2, b2, 100).download()
    np.testing.assert_array_equal(g100.replay(a2, b2).download(), expected)
    flip = [0]

    def moved() -> None:
        flip[0] ^= 1
        g100.replay(*((a2, b2) if flip[0] else (a, b)))

    sync = rt.synchronize
    out = [
        (
            "replay, captured 100-op session",
            per_op(lambda: g100.replay(a, b), sync, 100, 20, rounds),
        ),
        ("replay, captured 10-op session", per_op(lambda: g10.replay(a, b), sync, 10, 200, rounds)),
        ("replay, every input pointer changed (100 ops)", per_op(moved, sync, 100, 20, rounds)),
        (
            "the same 100 ops eager (host.run)",
            per_op(lambda: eager_chain(host, a, b, 100), sync, 100, 20, rounds),
        ),
    ]
    opened = captures_opened()
    x = a2
    for _ in range(50):  # only values change: each replay's input holds new values
        x = host.run(ADD, x, b2)
        g100.replay(x, b2)
    report = [
        {"row": name, "us_per_op": round(us, 3), "form": g100.form, "backend": rt.name}
        for name, us in out
    ]
    report.append(
        {"row": "recaptures when only values change", "count": captures_opened() - opened}
    )
    if backend == "cuda":
        ptrs = [int(t.storage.ptr) for t in (rt.empty("float32", (N,)), a, b)]
        for ops, batch in ((100, 20), (10, 200)):
            run, core_sync = core_graph(rt, ptrs, ops)
            us = per_op(run, core_sync, ops, batch, rounds)
            report.append(
                {"row": f"cuda.core graph of {ops} launches (floor)", "us_per_op": round(us, 3)}
            )
    eager = next(r["us_per_op"] for r in report if r["row"].startswith("the same 100"))
    replay = report[0]["us_per_op"]
    report.append({"row": "eager / replay (100 ops)", "ratio": round(eager / replay, 2)})
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="cuda, webgpu or cpu (default: best)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    backend = args.backend or tf.Host().default_backend().split(":")[0]
    report = rows(backend, args.rounds)
    for r in report:
        value = r.get("us_per_op", r.get("count", r.get("ratio")))
        print(f"{r['row']:<52} {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()

"""Per-call cost of ops exported to torch and JAX, beside the frameworks' own add, one process.

Rows (1k float32): the torch-exported ``ext_add_kernel.add`` eager (through ``torch.ops`` and
through the ``TorchOp`` call) vs ``torch.add``; ``add(x, y) * 2`` under
``torch.compile(fullgraph=True)`` vs the same with ``torch.add``; both adds under
``torch.compile(mode="reduce-overhead")`` (CUDA graphs; on a CPU-only machine the mode has no
graphs and the row says so); the JAX-exported op under ``jax.jit`` vs ``jnp.add`` under ``jit``.
Each row is set up (compiled, its values checked against its baseline's) on its own: a row that
fails is reported failed with its error and the others run. Interleaved batches, the sync
outside the timed region (host cost per call, the launch queue never fills); medians over
rounds. Runs on CUDA where torch and JAX have a GPU, else on the CPU (labelled).

    python bench/frameworks_bench.py [--rounds 60] [--batch 200] [--json PATH]
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import arguments

from tenferro_host.benchmarks import report
from tenferro_host.benchmarks.timing import Group, Result, measure, try_case

N = 1024
TORCH_ADD = "torch.add"
EXPORTED = "exported add (torch.ops)"
FULLGRAPH_BASE = "torch.add * 2, compile fullgraph"
FULLGRAPH = "exported add * 2, compile fullgraph"
REDUCE_BASE = "torch.add, compile reduce-overhead"
REDUCE = "exported add, compile reduce-overhead"
JNP_ADD = "jnp.add under jit"
JAX_EXPORTED = "exported add under jit"

#: (row, baseline, bound, label): the frameworks issue's targets, ratios in the same run.
TARGETS = (
    (EXPORTED, TORCH_ADD, 1.3, "exported add eager vs torch.add"),
    (FULLGRAPH, FULLGRAPH_BASE, 1.3, "compile fullgraph of add*2 vs the same with torch.add"),
    (REDUCE, REDUCE_BASE, 1.2, "reduce-overhead replay vs torch.add's"),
    (JAX_EXPORTED, JNP_ADD, 1.5, "exported add under jit vs jnp.add"),
)


def _checked(
    fn: Callable[[], Any], want: Callable[[], Any], close: Callable[[Any, Any], None]
) -> Callable[[], Any]:
    """``fn`` after three calls whose results match ``want``'s (torch's CUDA graph trees run a
    function eagerly once, capture it on the second call and replay it from the third)."""
    for _ in range(3):
        close(fn(), want())
    return fn


def torch_group(rounds: int, batch: int) -> Group:
    import torch

    from tenferro_host.interop import torch as tf_torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    a, b = torch.ones(N, device=device), torch.ones(N, device=device)

    def close(got: Any, want: Any) -> None:
        torch.testing.assert_close(got.clone(), want.clone())

    @functools.cache
    def export() -> Any:
        """The exported op, once (its failure is each of our rows' own)."""
        return tf_torch.export("ext_add_kernel.add")

    def eager(add: Callable[[Any, Any], Any]) -> Callable[[], Any]:
        return _checked(lambda: add(a, b), lambda: torch.add(a, b), close)

    def compiled(add: Callable[[Any, Any], Any], mode: str | None) -> Callable[[], Any]:
        if mode is None:
            g = torch.compile(lambda x, y: add(x, y) * 2, fullgraph=True)
            return _checked(lambda: g(a, b), lambda: torch.add(a, b) * 2, close)
        g = torch.compile(lambda x, y: add(x, y), mode=mode, fullgraph=True)
        fn = _checked(lambda: g(a, b), lambda: torch.add(a, b), close)
        if device == "cuda":
            from torch._dynamo.utils import counters

            skips = dict(counters["inductor"])
            if skips.get("cudagraph_skips"):  # the row would time compiled code without a graph
                raise RuntimeError(f"torch did not capture CUDA graphs: {skips}")
        return fn

    cases = [
        try_case(TORCH_ADD, lambda: lambda: torch.add(a, b)),
        try_case(EXPORTED, lambda: eager(export().packet), ours=True),
        try_case("exported add (TorchOp call)", lambda: eager(export()), ours=True),
        try_case(FULLGRAPH_BASE, lambda: compiled(torch.add, None)),
        try_case(FULLGRAPH, lambda: compiled(export().packet, None), ours=True),
        try_case(REDUCE_BASE, lambda: compiled(torch.add, "reduce-overhead")),
        try_case(REDUCE, lambda: compiled(export().packet, "reduce-overhead"), ours=True),
    ]
    sync: Callable[[], None] = torch.cuda.synchronize if device == "cuda" else lambda: None
    title = f"torch {torch.__version__} {device}"
    return Group("torch", title, cases, sync, batch=batch, rounds=rounds, profiled=(EXPORTED,))


def jax_group(rounds: int, batch: int) -> Group:
    import jax
    import jax.numpy as jnp

    from tenferro_host.interop import jax as tf_jax

    x = jnp.ones(N, jnp.float32)
    last: list[Any] = [None]

    def timed(fn: Callable[[Any, Any], Any]) -> Callable[[], None]:
        def call() -> None:
            last[0] = fn(x, x)

        return call

    def exported() -> Callable[[], None]:
        j_export = jax.jit(tf_jax.export("ext_add_kernel.add"))
        np.testing.assert_array_equal(np.asarray(j_export(x, x)), np.full(N, 2, np.float32))
        return timed(j_export)

    def sync() -> None:
        if last[0] is not None:
            last[0].block_until_ready()

    cases = [
        try_case(JNP_ADD, lambda: timed(jax.jit(jnp.add))),
        try_case(JAX_EXPORTED, exported, ours=True),
    ]
    title = f"jax {jax.__version__} {x.devices().pop().platform}"
    return Group("jax", title, cases, sync, batch=batch, rounds=rounds, profiled=(JAX_EXPORTED,))


def targets(results: list[Result]) -> list[dict[str, Any]]:
    """The targets' verdicts from the rows of this run."""
    median = {r.name: r.median for r in results if r.status == "ok"}
    out = []
    for row, base, bound, label in TARGETS:
        value = median.get(row)
        versus = median.get(base)
        ratio = value / versus if value is not None and versus else None
        out.append(report.verdict(label, ratio, "<=", bound))
    return out


def main() -> int:
    opts = arguments(__doc__)
    results: list[Result] = []
    titles = {}
    for make in (torch_group, jax_group):
        try:
            group = make(opts.rounds, opts.batch)
        except ImportError as exc:
            print(f"{make.__name__}: not run ({exc})")
            continue
        titles[group.key] = group.title
        print(f"-- {group.title}")
        for r in measure(group):
            results.append(r)
            shown = f"{r.median:8.2f} us" if r.status == "ok" else f"{r.status}: {r.note}"
            print(f"{r.name:45s} {shown}")
    for r in results:  # where the exported calls' time goes
        if r.calls_per_op is not None:
            top = "; ".join(f"{where} {n:g}x {us:.2f} us" for where, n, us in r.profile_top)
            print(f"profile {r.name}: {r.calls_per_op:.1f} Python calls per call; {top}")
    verdicts = targets(results)
    print("\n".join(report.target_table(verdicts)))
    if opts.json:
        with open(opts.json, "w") as fh:
            doc = {"groups": titles, "results": [r.as_dict() for r in results]}
            json.dump({**doc, "targets": verdicts}, fh, indent=2)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Per-call cost of ops exported to torch and JAX, beside the frameworks' own add, one process.

Rows (1k float32, the issue's targets): the torch-exported ``ext_add_kernel.add`` vs
``torch.add``; both under ``torch.compile(mode="reduce-overhead")`` (CUDA graphs; on a CPU-only
machine the mode has no graphs and the row says so); the JAX-exported op under ``jax.jit`` vs
``jnp.add`` under ``jit``. Interleaved batches, the sync outside the timed region (host cost
per call, the launch queue never fills); medians over rounds. Runs on CUDA where torch and JAX
have a GPU, else on the CPU (labelled).

    python bench/frameworks_bench.py [--rounds 60] [--batch 200] [--json PATH]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))  # PYTHONSAFEPATH (scripts/gpu-tests) omits it
from launch_timing import arguments, interleaved_medians, write_json

N = 1024


def torch_rows(rounds: int, batch: int) -> tuple[dict[str, float], str]:
    import torch

    from tenferro_host.interop import torch as tf_torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    add = tf_torch.export("ext_add_kernel.add")
    a = torch.ones(N, device=device)
    b = torch.ones(N, device=device)
    op = add.packet

    def f_torch(x: Any, y: Any) -> Any:
        return torch.add(x, y)

    def f_export(x: Any, y: Any) -> Any:
        return op(x, y)

    g_torch = torch.compile(f_torch, mode="reduce-overhead", fullgraph=True)
    g_export = torch.compile(f_export, mode="reduce-overhead", fullgraph=True)
    # CUDA graph trees run a function eagerly once, capture it on the second call and replay it
    # from the third; no tensor needs grad, so each call starts a new iteration (the outputs of
    # the previous replay may be overwritten: each check clones before the next call).
    for _ in range(3):
        want = g_torch(a, b).clone()
        got = g_export(a, b).clone()
        torch.testing.assert_close(got, want)
    if device == "cuda":
        from torch._dynamo.utils import counters

        skips = dict(counters["inductor"])
        if skips.get("cudagraph_skips"):  # the rows would time compiled code without a graph
            raise RuntimeError(f"torch did not capture CUDA graphs: {skips}")
    sync: Callable[[], None] = torch.cuda.synchronize if device == "cuda" else lambda: None
    rows = {
        "torch.add": lambda: torch.add(a, b),
        "torch.ops.tf_ext_add_kernel.add": lambda: op(a, b),
        "TorchOp.__call__ (attribute encoding)": lambda: add(a, b),
        "torch.add, compile reduce-overhead": lambda: g_torch(a, b),
        "exported add, compile reduce-overhead": lambda: g_export(a, b),
    }
    return interleaved_medians(rows, rounds, batch, sync), f"torch {torch.__version__} {device}"


def jax_rows(rounds: int, batch: int) -> tuple[dict[str, float], str]:
    import jax
    import jax.numpy as jnp

    from tenferro_host.interop import jax as tf_jax

    add = tf_jax.export("ext_add_kernel.add")
    x = jnp.ones(N, jnp.float32)
    j_add = jax.jit(jnp.add)
    j_export = jax.jit(add)
    last: list[Any] = [None]

    def run(fn: Callable[[Any, Any], Any]) -> Callable[[], None]:
        def call() -> None:
            last[0] = fn(x, x)

        return call

    def sync() -> None:
        if last[0] is not None:
            last[0].block_until_ready()

    rows = {"jnp.add under jit": run(j_add), "exported add under jit": run(j_export)}
    medians = interleaved_medians(rows, rounds, batch, sync)
    np.testing.assert_array_equal(np.asarray(j_export(x, x)), 2 * np.ones(N, np.float32))
    return medians, f"jax {jax.__version__} {x.devices().pop().platform}"


def main() -> int:
    opts = arguments(__doc__)
    medians: dict[str, float] = {}
    for rows in (torch_rows, jax_rows):
        try:
            found, where = rows(opts.rounds, opts.batch)
        except ImportError as exc:
            print(f"{rows.__name__}: not run ({exc})")
            continue
        print(f"-- {where}")
        for name, us in found.items():
            print(f"{name:45s} {us:8.2f} us")
        medians.update({f"{where}: {k}": v for k, v in found.items()})
    ratios = {}
    for key in list(medians):
        if key.endswith("torch.ops.tf_ext_add_kernel.add"):
            base = key.replace("torch.ops.tf_ext_add_kernel.add", "torch.add")
            ratios["exported - torch.add (us)"] = medians[key] - medians[base]
        if key.endswith("exported add, compile reduce-overhead"):
            base = key.replace("exported add", "torch.add")
            ratios["reduce-overhead exported / torch.add"] = medians[key] / medians[base]
        if key.endswith("exported add under jit"):
            base = key.replace("exported add under jit", "jnp.add under jit")
            ratios["jit exported / jnp.add"] = medians[key] / medians[base]
    for name, value in ratios.items():
        print(f"{name:45s} {value:8.2f}")
    write_json(opts.json, medians, ratios)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

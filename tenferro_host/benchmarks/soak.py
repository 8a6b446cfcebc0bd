"""Soak: a million launches with module and tensor churn stay within bounded memory.

Part 1, on one CUDA runtime: rounds of ``--batch`` raw launches of an add kernel, each round in
its own session. Every round also allocates and drops output tensors, uploads a fresh input
every tenth round, takes a module from the runtime's resource cache under one of more keys than
the cache holds (so modules are loaded, evicted and unloaded all along), and every
``--compile-every`` rounds compiles a new variant with NVRTC and drops it. Host RSS, the pool's
reserved and used bytes and the live module count are sampled; the run fails when the last
quarter of the run peaks above the first quarter's peak by more than ``--slack-mib`` (RSS and
pool), or live modules exceed the cache's bound plus the variants in flight. The last round's
results are checked against numpy.

Part 2: ``--sessions`` sessions opened and closed across ``--threads`` threads, alternating
between two runtimes of ``--backend`` (each session launches a DSL fill; each thread checks
its last). Any exception in any thread fails the run.

    python bench/soak.py [--launches 1000000] [--batch 1000] [--sessions 10000] [--json PATH]
    python bench/soak.py --launches 0 --backend webgpu   # part 2 only, on another backend
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any, cast

import numpy as np

import tenferro_host as tf

from ..cuda import raw
from .kernels import fill

SOURCE = r"""
extern "C" __global__ void add(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i] + VARIANT;
}
extern "C" __global__ void fill(float* out, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = v;
}
"""
N = 4096
MIB = 1 << 20


def rss_bytes() -> int:
    """Resident set size of this process (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return -1


def compile_variant(rt: Any, variant: int) -> bytes:
    """The add and fill module compiled for ``rt``'s device with ``VARIANT`` = ``variant``."""
    options = raw.NvrtcOptions(arch=rt.device_info.arch, defines={"VARIANT": f"{variant}.0f"})
    return raw.nvrtc_compile(SOURCE, options).data


def launch_soak(rt: Any, launches: int, batch: int, compile_every: int) -> dict[str, Any]:
    """Part 1: ``launches`` raw launches in rounds of ``batch``, with module and tensor churn;
    the samples of RSS, pool bytes and live modules (the last round's result is checked)."""
    image = compile_variant(rt, 0)
    keys = rt.resources.max_entries + 44  # more module keys than the cache holds: evictions
    cfg = raw.LaunchConfig.flat(N, 256)
    a_host = np.arange(N, dtype=np.float32)
    a = rt.upload(a_host)
    samples: list[dict[str, int]] = []
    done = rounds = 0
    start = time.perf_counter()
    out = None
    while done < launches:
        with rt.session() as s, cast(Any, tf.cuda.exec_session(s)).raw("soak.add") as rs:
            if rounds % 10 == 0:
                a = rt.upload(a_host)
            module = rs.resource(
                ("soak.module", rounds % keys), lambda: rs.load_cubin(image), nbytes=len(image)
            )
            if compile_every and rounds % compile_every == 0:
                rs.load_cubin(compile_variant(rt, rounds))  # a new module, dropped at once
            fn = module.function("add")
            for _ in range(4):  # tensor churn: outputs made and dropped
                rs.alloc_output(tf.float32, (N,))
            out = rs.alloc_output(tf.float32, (N,))
            args = [rs.tensor_mut(out), rs.tensor(a), rs.tensor(a), raw.i32(N)]
            n = min(batch, launches - done)
            for _ in range(n):
                rs.launch(fn, cfg, args)
        done += n
        rounds += 1
        if rounds % 10 == 0 or done >= launches:
            rt.synchronize()
            pool = rt.pool_stats()
            samples.append(
                {
                    "launches": done,
                    "rss": rss_bytes(),
                    "pool_reserved": pool["reserved_current"],
                    "pool_used": pool["used_current"],
                    "live_modules": rt.module_counts["loaded"] - rt.module_counts["unloaded"],
                    "cached_modules": rt.resources.stats()["entries"],
                }
            )
    seconds = time.perf_counter() - start
    assert out is not None
    np.testing.assert_array_equal(out.download(), 2 * a_host)
    return {
        "launches": done,
        "rounds": rounds,
        "seconds": round(seconds, 1),
        "us_per_launch": round(seconds / done * 1e6, 2),
        "module_counts": dict(rt.module_counts),
        "cache": rt.resources.stats(),
        "samples": samples,
    }


def curve(samples: list[dict[str, int]], key: str) -> dict[str, int]:
    """Start, peak, end and the first and last quarters' peaks of ``key`` over ``samples``."""
    values = [s[key] for s in samples]
    quarter = max(len(values) // 4, 1)
    return {
        "start": values[0],
        "peak": max(values),
        "end": values[-1],
        "first_quarter_peak": max(values[:quarter]),
        "last_quarter_peak": max(values[-quarter:]),
    }


def session_soak(host: Any, backend: str, sessions: int, threads: int) -> dict[str, Any]:
    """``sessions`` sessions over ``threads`` threads alternating between two runtimes.

    Each session launches a DSL fill (on CUDA: generated CUDA C through raw sessions and the
    runtime's module cache, shared by the threads); each thread checks its last fill.
    """
    runtimes = [host.backend(backend), host.new_backend(backend)]
    errors: list[str] = []
    per_thread = sessions // threads

    def worker(index: int) -> None:
        try:
            last = None
            for i in range(per_thread):
                rt = runtimes[(index + i) % 2]
                with rt.session() as s, s.exec_session().jit("soak.sessions") as js:
                    out = js.alloc_output(tf.float32, (256,))
                    js.launch(fill, js.cube_count_1d(256), js.cube_dim_1d(), out, float(index))
                last = out
            assert last is not None and (last.download() == index).all(), "wrong fill"
        except Exception as exc:  # noqa: BLE001 - reported with the thread's index
            errors.append(f"thread {index}: {type(exc).__name__}: {exc}")

    start = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return {
        "sessions": per_thread * threads,
        "threads": threads,
        "runtimes": [rt.name for rt in runtimes],
        "seconds": round(time.perf_counter() - start, 1),
        "errors": errors,
    }


def launch_soak_report(rt: Any, args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """Part 1 with its curves and the failures it found."""
    launches = launch_soak(rt, args.launches, args.batch, args.compile_every)
    samples = launches.pop("samples")
    keys = ("rss", "pool_reserved", "pool_used", "live_modules")
    curves = {key: curve(samples, key) for key in keys}
    slack = args.slack_mib * MIB
    failures = [
        f"{key} grew: last-quarter peak {c['last_quarter_peak']} > first-quarter peak "
        f"{c['first_quarter_peak']} + {args.slack_mib} MiB"
        for key, c in curves.items()
        if key != "live_modules" and c["last_quarter_peak"] > c["first_quarter_peak"] + slack
    ]
    bound = rt.resources.max_entries + 8  # the cache, plus evicted modules awaiting retirement
    if curves["live_modules"]["peak"] > bound:
        failures.append(f"live modules peaked at {curves['live_modules']['peak']} > {bound}")
    report = {
        "launch_soak": launches,
        "curves": curves,
        "curve_points": samples[:: max(len(samples) // 50, 1)],
    }
    return report, failures


def main() -> int:
    """Run both parts as the flags say, print the report (and write the JSON); 1 on a failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda", help="part 2's backend (part 1 is CUDA)")
    parser.add_argument("--launches", type=int, default=1_000_000, help="0 skips part 1")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--compile-every", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--slack-mib", type=int, default=64)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    host = tf.Host()
    result: dict[str, Any] = {}
    failures: list[str] = []
    if args.launches:
        rt = host.backend("cuda")
        result["device"] = rt.device_info.name
        report, failures = launch_soak_report(rt, args)
        result.update(report)
    sessions = session_soak(host, args.backend, args.sessions, args.threads)
    failures += sessions["errors"]
    result["session_soak"] = sessions
    result["failures"] = failures
    print(json.dumps({k: v for k, v in result.items() if k != "curve_points"}, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

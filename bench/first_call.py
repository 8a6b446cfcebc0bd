"""A fresh process's first compile hit, beside a bare cuda.core process doing the same work.

Each figure is the median over ``--runs`` fresh interpreters of this Python (the same process
kind), the persistent kernel cache warm (one process compiles first, into a private cache
directory). Both start from an initialized context: the bare process makes its stream and
allocates (the memory pool made), as the project's upload and session do, outside the timing;
then it loads the CUBIN with cuda.core, reads a kernel attribute, launches and synchronizes
(the floor); the project process does ``rs.compile_nvrtc(src).function(name)`` and the same
launch. Imports are timed apart from the first call; the report lists the modules the project's
first call imported and its cProfile top, which is where any time above the floor goes. Both
kinds run twice: as installed (bytecode as the install wrote it, or none) and with bytecode
(``PYTHONPYCACHEPREFIX``, written by a warm-up process), which separates the import of
uncompiled modules from the call's own work. ``--json`` writes the figures and the target
(first call <= 1 ms above the floor). Needs a CUDA device::

    .venv/bin/python bench/first_call.py [--runs 7] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from tenferro_host.benchmarks import report

SOURCE = r"""
extern "C" __global__ void first_call_add(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""

BARE = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from cuda.core import Device, LaunchConfig, ObjectCode, launch
t1 = time.perf_counter()
cubin = open(sys.argv[1], "rb").read()
dev = Device(0); dev.set_current(); stream = dev.create_stream()
buf = dev.allocate(3 * 4 * 1024, stream=stream)  # as the project's upload: the pool made
stream.sync()
t2 = time.perf_counter()
kernel = ObjectCode.from_cubin(cubin).get_kernel("first_call_add")
t3 = time.perf_counter()
kernel.attributes.max_threads_per_block
p = int(buf.handle)
launch(stream, LaunchConfig(grid=4, block=256), kernel, p, p + 4096, p + 8192, np.int32(1024))
stream.sync()
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "context": t2 - t1, "load": t3 - t2,
                  "attribute+launch+sync": t4 - t3, "load+launch": t4 - t2}))
"""

PROJECT = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import tenferro_host as tf
from tenferro_host.cuda import raw
t1 = time.perf_counter()
host = tf.Host(); rt = host.backend("cuda")
a = rt.upload(np.ones(1024, np.float32))
SRC = open(sys.argv[1]).read()
profile = sys.argv[2] == "profile"
with rt.session() as s, tf.cuda.exec_session(s).raw("bench.first_call") as rs:
    rs.synchronize()
    t2 = time.perf_counter()
    before = set(sys.modules)
    if profile:
        import cProfile, io, pstats
        pr = cProfile.Profile(); pr.enable()
    fn = rs.compile_nvrtc(SRC).function("first_call_add")
    t3 = time.perf_counter()
    if profile:
        pr.disable()
    out = rs.alloc_output(tf.float32, (1024,))
    args = [rs.tensor_mut(out), rs.tensor(a), rs.tensor(a), raw.i32(1024)]
    rs.launch(fn, raw.LaunchConfig.flat(1024, 256), args)
    rs.synchronize()
    t4 = time.perf_counter()
    fn2 = rs.compile_nvrtc(SRC).function("first_call_add")
    t5 = time.perf_counter()
    report = {"import": t1 - t0, "first compile_nvrtc+function": t3 - t2,
              "launch+sync": t4 - t3, "second compile_nvrtc+function": t5 - t4,
              "first call, all": t4 - t2,
              "imported by the first call": sorted(set(sys.modules) - before)}
    if profile:
        text = io.StringIO()
        pstats.Stats(pr, stream=text).sort_stats("cumulative").print_stats(20)
        report["profile"] = text.getvalue()
print(json.dumps(report))
"""


def _run(script: str, *args: str, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"a measured process failed:\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", help="also write the figures and the target to this file")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tenferro-first-call-")
    env = {**os.environ, "TENFERRO_CACHE_DIR": os.path.join(work, "cache")}
    src = os.path.join(work, "add.cu")
    with open(src, "w") as f:
        f.write(SOURCE)
    # Warm the persistent cache, and write the CUBIN the bare process loads.
    from tenferro_host.cuda import raw

    with open(os.path.join(work, "add.cubin"), "wb") as f:
        f.write(raw.nvrtc_compile(SOURCE, raw.NvrtcOptions(arch=_arch())).data)
    _run(PROJECT, src, "time", env=env)

    prefix = os.path.join(work, "pycache")
    bytecode = {**env, "PYTHONPYCACHEPREFIX": prefix}
    bytecode.pop("PYTHONDONTWRITEBYTECODE", None)
    _run(BARE, os.path.join(work, "add.cubin"), env=bytecode)  # writes the bytecode
    _run(PROJECT, src, "time", env=bytecode)
    print(f"fresh processes: {args.runs} of each, median ms (python {sys.version.split()[0]})")
    figures = {
        mode: _report(mode, mode_env, src, os.path.join(work, "add.cubin"), args.runs)
        for mode, mode_env in (("as installed", env), ("with bytecode", bytecode))
    }
    above = figures["as installed"]["first call above the floor"]
    targets = [
        report.verdict("first call above the bare floor, as installed", above, "<=", 1, " ms")
    ]
    print("\n".join(report.target_table(targets)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"figures_ms": figures, "targets": targets}, f, indent=2)


def _report(mode: str, env: dict[str, str], src: str, cubin: str, runs: int) -> dict[str, float]:
    """Print one mode's medians (ms), imports and profile; return the medians."""
    bare = [_run(BARE, cubin, env=env) for _ in range(runs)]
    ours = [_run(PROJECT, src, "time", env=env) for _ in range(runs)]
    profiled = _run(PROJECT, src, "profile", env=env)

    def median_ms(rows: list[dict[str, Any]], key: str) -> float:
        return 1e3 * statistics.median(r[key] for r in rows)

    print(f"-- {mode}")
    figures = {}
    for key in ("import", "context", "load", "attribute+launch+sync", "load+launch"):
        figures[f"bare {key}"] = median_ms(bare, key)
        print(f"  bare cuda.core   {key:32s} {figures[f'bare {key}']:9.3f}")
    for key in (
        "import",
        "first compile_nvrtc+function",
        "launch+sync",
        "first call, all",
        "second compile_nvrtc+function",
    ):
        figures[key] = median_ms(ours, key)
        print(f"  tenferro-host    {key:32s} {figures[key]:9.3f}")
    above = figures["first call, all"] - figures["bare load+launch"]
    figures["first call above the floor"] = above
    print(f"  first call above the bare load + launch floor: {above:.3f} ms (target <= 1 ms)")
    print("  modules the first call imported:", ", ".join(ours[0]["imported by the first call"]))
    print(profiled["profile"])
    return figures


def _arch() -> str:
    from cuda.core import Device

    major, minor = Device(0).compute_capability
    return f"sm_{major}{minor}"


if __name__ == "__main__":
    main()

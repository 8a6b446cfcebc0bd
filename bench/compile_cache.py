"""Compile cost with the persistent kernel cache: cold, in-memory hit, fresh-process hit.

For the raw add kernel and the DSL add kernel (its generated CUDA C), each figure is the median
over ``--repeat`` fresh processes, so every process starts with nothing in memory:

* ``nvrtc`` — the compile with the cache off (``TENFERRO_CACHE=off``): the baseline;
* ``cold`` — the first compile in a process, empty cache directory (compile + store);
* ``cold_warm_nvrtc`` — a second, different compile in that process (NVRTC already loaded);
* ``memory_hit`` — the same compile again through the per-runtime ``ResourceCache`` in front;
* ``fresh_hit`` — the first compile in a new process over the filled directory: a disk hit;
* ``fresh_hit_after_a_load`` — a second disk hit in that new process: what a hit costs once the
  process has loaded one module (the first load of a process pays the driver's own start-up);
* ``fresh_hit_nvrtc_loaded`` — the same with NVRTC loaded first, as a CUDA session has it (the
  device probe loads NVRTC); a hit no longer loads NVRTC when it comes from the wheel (the key
  names its library file, found without loading it), so the two should be alike.

With a CUDA device every compile runs in a raw session (``rs.compile_nvrtc``, then loaded as a
module); without one, compile-only (``nvrtc_compile`` for sm_90). Times in milliseconds.

With a WebGPU adapter, the DSL add kernel's first launch in a WebGPU JIT session, after the
runtime has built one other pipeline (wgpu and driver start-up are not in the figures) and with
the kernel already specialized: ``off`` (cache off: WGSL generation + pipeline), ``cold``
(generation + pipeline + store), ``generate`` (WGSL generation alone), ``memory_hit`` (the
second launch: the runtime's pipeline cache), ``fresh_hit`` (a new process over the filled
cache: WGSL loaded, pipeline built — wgpu 0.32 cannot save pipelines).

    python bench/compile_cache.py [--repeat 9] [--json PATH]     (JSON also to $OUT/)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ADD = r"""
extern "C" __global__ void add_kernel(float* out, const float* lhs, const float* rhs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lhs[i] + rhs[i];
}
"""


def _sources(kernel: str, arch: str) -> tuple[str, str]:
    """(source, a different source of the same size) of ``kernel``."""
    if kernel == "raw":
        return ADD, ADD.replace("lhs[i] + rhs[i]", "lhs[i] - rhs[i]")
    from ext_add_kernel import dsl
    from tenferro_host_cuda_jit._codegen import generate

    import tenferro_host as tf
    from tenferro_host.kernel._kernel import ArrayDesc

    def source(dtype: Any) -> str:
        spec = dsl.add_kernel.specialize([ArrayDesc(dtype, 1)] * 3, target="cuda", features=(arch,))
        return generate(spec).source

    return source(tf.float32), source(tf.float64)


def _compiler(stack: contextlib.ExitStack) -> tuple[str, Any, Callable[[str], Any], bool]:
    """(arch, in-memory cache, compile function, on a GPU?): a raw session's ``compile_nvrtc``
    (and its runtime's cache) with a CUDA device, else compile-only ``nvrtc_compile``."""
    import tenferro_host as tf
    from tenferro_host.cuda import raw
    from tenferro_host.provider import ResourceCache

    host = tf.Host()
    if not host.backend_status("cuda").available:
        opts = raw.NvrtcOptions(arch="sm_90")
        return "sm_90", ResourceCache(), lambda src: raw.nvrtc_compile(src, opts), False
    rt: Any = host.backend("cuda")
    ex: Any = tf.cuda.exec_session(stack.enter_context(rt.session()))
    rs = stack.enter_context(ex.raw("bench.compile_cache"))
    return rt.device_info.arch, rt.resources, rs.compile_nvrtc, True


def child(kernel: str, with_nvrtc: bool) -> dict[str, float]:
    """One fresh process: time the first compile, an in-memory hit and a second compile."""
    with contextlib.ExitStack() as stack:
        arch, memory, compile_, gpu = _compiler(stack)
        first, second = _sources(kernel, arch)
        if with_nvrtc:
            from tenferro_host_cuda._nvrtc import _nvrtc

            _nvrtc().nvrtcVersion()  # imports cuda.bindings.nvrtc and loads libnvrtc
        out = {"gpu": float(gpu)}
        t0 = time.perf_counter()
        memory.get(("bench", first), lambda: compile_(first), nbytes=0)
        out["first"] = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        memory.get(("bench", first), lambda: compile_(first), nbytes=0)
        out["memory_hit"] = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        compile_(second)
        out["second"] = (time.perf_counter() - t0) * 1e3
    return out


def webgpu_child() -> dict[str, float]:
    """One fresh process: time the DSL add kernel's first and second launch on WebGPU."""
    import numpy as np
    from ext_add_kernel import dsl
    from tenferro_host_webgpu._wgsl import _shader as wgsl

    import tenferro_host as tf
    from tenferro_host.kernel._kernel import ArrayDesc

    host = tf.Host()
    if not host.backend_status("webgpu").available:
        return {"available": 0.0}
    rt: Any = host.backend("webgpu")
    ints = rt.upload(np.arange(256, dtype=np.int32))
    floats = rt.upload(np.arange(256, dtype=np.float32))
    out = rt.zeros("float32", (256,))
    out_data: dict[str, float] = {"available": 1.0}
    with rt.session() as s:
        ex: Any = tf.webgpu.exec_session(s)
        dsl.add(ex, ints, ints)  # another kernel first: wgpu and the driver are started
        with ex.jit("bench.compile_cache") as js:
            args = (out, floats, floats)
            spec = dsl.add_kernel.specialize(
                [ArrayDesc(tf.float32, 1)] * 3, target="webgpu", features=js.features
            )
            for name in ("first", "memory_hit"):
                t0 = time.perf_counter()
                js.launch(dsl.add_kernel, 1, 256, *args)
                out_data[name] = (time.perf_counter() - t0) * 1e3
            t0 = time.perf_counter()
            wgsl.generate(spec, (256, 1, 1), (0, 1, 1), False)
            out_data["generate"] = (time.perf_counter() - t0) * 1e3
    return out_data


def run_child(
    kernel: str, cache_dir: Path, *, off: bool = False, with_nvrtc: bool = False
) -> dict[str, float]:
    env = {**os.environ, "TENFERRO_CACHE_DIR": str(cache_dir)}
    env.pop("TENFERRO_CACHE", None)
    if off:
        env["TENFERRO_CACHE"] = "off"
    argv = [sys.executable, __file__, "--child", kernel] + (["--with-nvrtc"] if with_nvrtc else [])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"child failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(kernel: str, repeat: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    gpu = 0.0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="tf-bench-cache-") as tmp:
            root = Path(tmp)
            add("nvrtc", run_child(kernel, root, off=True)["first"])
            cold = run_child(kernel, root)
            add("cold", cold["first"])
            add("cold_warm_nvrtc", cold["second"])
            add("memory_hit", cold["memory_hit"])
            hit = run_child(kernel, root)
            add("fresh_hit", hit["first"])
            add("fresh_hit_after_a_load", hit["second"])
            add("fresh_hit_nvrtc_loaded", run_child(kernel, root, with_nvrtc=True)["first"])
            gpu = cold["gpu"]
    medians = {name: round(statistics.median(v), 3) for name, v in samples.items()}
    medians["gpu"] = gpu
    return medians


def measure_webgpu(repeat: int) -> dict[str, float] | None:
    """The WebGPU figures (medians over ``repeat`` fresh-process pairs); None without an adapter."""
    samples: dict[str, list[float]] = {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="tf-bench-cache-") as tmp:
            root = Path(tmp)
            off = run_child("webgpu", root, off=True)
            if not off["available"]:
                return None
            cold = run_child("webgpu", root)
            hit = run_child("webgpu", root)
            for name, value in (
                ("off", off["first"]),
                ("cold", cold["first"]),
                ("generate", cold["generate"]),
                ("memory_hit", cold["memory_hit"]),
                ("fresh_hit", hit["first"]),
            ):
                samples.setdefault(name, []).append(value)
    return {name: round(statistics.median(v), 3) for name, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="fresh processes per figure")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", choices=["raw", "dsl", "webgpu"], help=argparse.SUPPRESS)
    parser.add_argument("--with-nvrtc", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        found = webgpu_child() if args.child == "webgpu" else child(args.child, args.with_nvrtc)
        print(json.dumps(found))
        return 0
    results = {kernel: measure(kernel, args.repeat) for kernel in ("raw", "dsl")}
    mode = "cuda session" if results["raw"]["gpu"] else "compile-only (no GPU)"
    print(f"compile cache, {mode}, medians of {args.repeat} fresh processes (ms)")
    names = [n for n in results["raw"] if n != "gpu"]
    print(f"{'':24}" + "".join(f"{k:>10}" for k in results))
    for name in names:
        print(f"{name:24}" + "".join(f"{results[k][name]:10.3f}" for k in results))
    report: dict[str, Any] = {"mode": mode, "repeat": args.repeat, "medians_ms": results}
    webgpu = measure_webgpu(args.repeat)
    if webgpu is None:
        print("webgpu: no adapter")
    else:
        print("webgpu, DSL add (WGSL text cached; pipelines are built in every process)")
        for name, value in webgpu.items():
            print(f"{name:24}{value:10.3f}")
        report["webgpu_medians_ms"] = webgpu
    targets = [args.json] if args.json else []
    if os.environ.get("OUT"):
        targets.append(os.path.join(os.environ["OUT"], "compile_cache.json"))
    for path in targets:
        with open(path, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Several processes on one cache: one compile for two at once; a killed writer leaves no trace."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import cache_support

from tenferro_host.provider import CachedKernel, KernelCache, KernelKey

cache_dir = cache_support.cache_dir

WAIT_S = 120  # a bound on waiting for a child to get ready, never a measured figure

_COMPILE_AT_ONCE = textwrap.dedent(
    """
    import hashlib, json, os, sys, time
    from tenferro_host.cuda import raw
    from tenferro_host.provider import _kernel_cache as kc

    ready, go = sys.argv[1], sys.argv[2]
    source = open(sys.argv[3]).read()
    kc.active_kernel_cache()  # everything imported before the start
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    image = raw.nvrtc_compile(source, raw.NvrtcOptions(arch="sm_90"))
    cache = kc.active_kernel_cache()
    print(json.dumps({"hits": cache.hits, "misses": cache.misses,
                      "image": hashlib.sha256(image.data).hexdigest()}))
    """
)

_STALLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from tenferro_host.provider import _kernel_cache as kc
    from tenferro_host.provider import _kernel_cache_store as kc_store

    real = os

    class Stalling:  # the real os, except that the first write stops halfway, for good
        def __getattr__(self, name):
            return getattr(real, name)

        def write(self, fd, data):
            done = real.write(fd, data[: len(data) // 2])
            open(sys.argv[2], "w").close()
            time.sleep(600)
            return done

    kc_store.os = Stalling()  # the writing half's
    key = kc.KernelKey("test", "k.cu", {"source": "stalled"})
    kc.KernelCache(sys.argv[1]).load_or_build(key, lambda: kc.CachedKernel(b"y" * 100000, {}))
    """
)


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the child never got ready"
        time.sleep(0.01)


def test_two_processes_compiling_one_kernel_compile_it_once(
    cache_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    source = tmp_path / "add.cu"
    source.write_text(
        'extern "C" __global__ void add(float* o, const float* a, const float* b, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + b[i]; }\n"
    )
    go = tmp_path / "go"
    env = {**os.environ, "TENFERRO_CACHE_DIR": str(cache_dir)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _COMPILE_AT_ONCE,
                str(tmp_path / f"ready{i}"),
                str(go),
                str(source),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for i, proc in enumerate(procs):  # both imported everything: they start together
        _wait_for(tmp_path / f"ready{i}", proc)
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert sorted((r["misses"], r["hits"]) for r in results) == [(0, 1), (1, 0)]
    assert results[0]["image"] == results[1]["image"]
    stats = KernelCache(cache_dir).stats()
    assert (stats["entries"], stats["misses"], stats["hits"]) == (1, 1, 1)


def test_a_writer_killed_mid_write_leaves_no_lock_and_no_half_entry(
    cache_dir: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITER, str(cache_dir), str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(ready, proc)
        (tmp,) = (cache_dir / "tmp").iterdir()
        assert 0 < tmp.stat().st_size < 100000  # the half-written temp file
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=WAIT_S)
    key = KernelKey("test", "k.cu", {"source": "stalled"})
    assert not (cache_dir / "entries" / key.digest[:2] / key.digest).exists()
    assert not list((cache_dir / "entries").rglob("*")) or all(
        p.is_dir() for p in (cache_dir / "entries").rglob("*")
    )
    for lock in (cache_dir / "locks").iterdir():  # the holder's death released every lock
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    cache = KernelCache(cache_dir)
    got = cache.load_or_build(key, lambda: CachedKernel(b"whole", {}))
    assert got.payload == b"whole" and cache.misses == 1
    assert KernelCache(cache_dir).load_or_build(key, lambda: CachedKernel(b"no", {})).payload == (
        b"whole"
    )
    assert cache.prune()["temp_files"] == 1  # the dead writer's temp file
    assert list((cache_dir / "tmp").iterdir()) == []

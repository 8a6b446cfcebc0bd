"""``bench/soak.py`` at a small scale: sessions from four threads on two runtimes, and on CUDA
the launch soak with a cache small enough that modules are evicted all along."""

from __future__ import annotations

import argparse

import pytest
from support.backends import available_host, kind_params

from tenferro_host.benchmarks.soak import launch_soak_report, session_soak
from tenferro_host.provider import ResourceCache


@pytest.mark.parametrize("backend", kind_params("cpu", "webgpu"))
def test_sessions_from_four_threads_on_two_runtimes(backend):
    report = session_soak(available_host(backend), backend, sessions=800, threads=4)
    assert report["errors"] == []
    assert report["sessions"] == 800


@pytest.mark.gpu
@pytest.mark.cuda
def test_launch_soak_with_module_eviction_stays_bounded():
    host = available_host("cuda")
    rt = host.new_backend("cuda")
    rt.resources = ResourceCache(max_entries=8)  # 52 module keys over 8 slots: evictions
    args = argparse.Namespace(launches=20_000, batch=100, compile_every=25, slack_mib=64)
    report, failures = launch_soak_report(rt, args)
    assert failures == []
    assert report["launch_soak"]["launches"] == 20_000
    assert report["launch_soak"]["cache"]["evictions"] > 100
    counts = report["launch_soak"]["module_counts"]
    assert counts["loaded"] - counts["unloaded"] <= 8 + 8
    assert session_soak(host, "cuda", sessions=400, threads=4)["errors"] == []

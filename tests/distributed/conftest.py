"""The distributed tests' local Ray cluster: one per test module (starting Ray costs seconds),
on loopback only (tests/support/ray_cluster.py), 2 CPUs and 2 logical GPUs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cluster whose workers import the stand-in NCCL from tests/support; the directory its
    ranks rendezvous in (``FAKE_NCCL_DIR``)."""
    ray_cluster = pytest.importorskip("support.ray_cluster", reason="needs Ray: the [ray] extra")
    saved = dict(os.environ)
    # Workers inherit this environment.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), saved.get("PYTHONPATH")]))
    os.environ["FAKE_NCCL_DIR"] = str(tmp_path_factory.mktemp("fake-nccl"))
    ray_cluster.start_local_cluster()
    try:
        yield Path(os.environ["FAKE_NCCL_DIR"])
    finally:
        ray_cluster.ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)

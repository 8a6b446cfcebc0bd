"""Shared test set-up: the tenferro-host pytest kit, fixture distributions, subprocesses.

The fixture distributions under ``tests/fixtures/`` are real packages with entry points. The
session fixture ``fixture_dists`` installs them once with pip into a temporary directory; tests
then run the host in a subprocess with that directory on ``PYTHONPATH``, so the ordinary
entry-point machinery finds them. ``tf_fixture_collide`` gets a directory of its own, since it
makes ``ext_add_kernel.add`` unusable wherever it is installed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from support.backends import behaviour_backend_params
from support.pip_target import pip_install_target
from support.process_health import cuda_problems, interpreter_problems
from support.subprocesses import KERNEL_CACHE_DIR, PROBE_CACHE_DIR, Subprocess

from tenferro_host import Host
from tenferro_host.provider import Runtime
from tenferro_host.testing import pytest_plugin

# Strategies here draw tiny values; a draw that takes seconds is the machine stalling (the GPU
# machine under a concurrent GPU test did, once: 2.5 s for one tuple), not a strategy to fix.
hypothesis_settings.register_profile(
    "tenferro", suppress_health_check=[HealthCheck.too_slow], deadline=None
)
hypothesis_settings.load_profile("tenferro")

# tests/support holds the tests' helpers, with no doctests: --doctest-modules would import each,
# and ray_cluster.py cannot be imported where Ray is absent (the GPU machine).
collect_ignore_glob = ["support/*.py"]

# Ray reads this once, when first imported: whichever test imports it first, a test cluster
# stays on loopback (tests/support/ray_cluster.py).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

FIXTURES = Path(__file__).parent / "fixtures"
COLLIDE = "tf_fixture_collide"


def pytest_configure(config: pytest.Config) -> None:
    # The kit normally arrives through its pytest11 entry point; register it when it did not.
    if not config.pluginmanager.is_registered(pytest_plugin):
        config.pluginmanager.register(pytest_plugin, "tenferro_host.testing")
    os.environ[KERNEL_CACHE_DIR] = tempfile.mkdtemp(prefix="tenferro-test-kernel-cache-")
    os.environ[PROBE_CACHE_DIR] = tempfile.mkdtemp(prefix="tenferro-test-probe-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop(KERNEL_CACHE_DIR, ""), ignore_errors=True)
    shutil.rmtree(os.environ.pop(PROBE_CACHE_DIR, ""), ignore_errors=True)


@pytest.fixture(scope="session")
def subproc() -> Subprocess:
    """Runs Python code or the CLI in a fresh interpreter (see :class:`Subprocess`)."""
    return Subprocess()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "each_backend" in metafunc.fixturenames:
        metafunc.parametrize("each_backend", behaviour_backend_params())


@pytest.fixture
def each_rt(host: Host, each_backend: str) -> Runtime:
    """A runtime of each backend a behaviour test runs on (``support.backends``), in a fresh
    Host: a test that changes runtime state changes only its own."""
    return host.backend(each_backend)


@dataclass(frozen=True)
class FixtureDists:
    """Directories holding installed fixture distributions (for PYTHONPATH)."""

    faulty: Path  # every fixture except the colliding one
    collide: Path  # tf_fixture_collide alone


@pytest.fixture(scope="session")
def fixture_dists(tmp_path_factory: pytest.TempPathFactory) -> FixtureDists:
    """Install every fixture distribution once (one pip run, offline), split in two dirs."""
    root = tmp_path_factory.mktemp("fixture_dists")
    sources = root / "src"
    shutil.copytree(FIXTURES, sources)  # builds write egg-info next to the sources
    faulty, collide = root / "faulty", root / "collide"
    pip_install_target(
        sorted(p for p in sources.iterdir() if (p / "pyproject.toml").exists()), faulty
    )
    collide.mkdir()
    for entry in faulty.glob(f"{COLLIDE}*"):
        entry.rename(collide / entry.name)
    return FixtureDists(faulty, collide)


GPU_WORKERS = int(os.environ.get("TENFERRO_TEST_GPU_WORKERS", "0"))
"""Set by ``scripts/gpu-verify``: how many test workers share the GPU (0: not shared)."""


@pytest.fixture(autouse=True, scope="module")
def torch_within_its_share_of_a_shared_gpu() -> Iterator[None]:
    """Where workers share the GPU, each worker's torch caching allocator is bounded to its
    share and gives back what it cached after every module, so the others can allocate."""
    yield
    torch = sys.modules.get("torch")
    if GPU_WORKERS and torch is not None and torch.cuda.is_initialized():
        torch.cuda.set_per_process_memory_fraction(0.9 / GPU_WORKERS)
        torch.cuda.empty_cache()


@pytest.fixture(autouse=True, scope="module")
def process_intact_after_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test module: the interpreter's shared objects and the CUDA contexts are sound."""
    yield
    problems = interpreter_problems() + cuda_problems()
    if problems:
        pytest.fail(f"{request.module.__name__} left the process damaged: {'; '.join(problems)}")

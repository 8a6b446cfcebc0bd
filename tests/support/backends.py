"""The backends a test runs on, as the kit's ``backend_name`` cases (marked, and skipped with
the backend's reason where unavailable): for a behaviour every backend shares, the CPU always
and WebGPU where wgpu finds an adapter (Mesa's llvmpipe counts).

A behaviour every backend shares is one test over these, not a copy per backend directory;
``tests/conftest.py`` hands them out as the ``each_backend`` and ``each_rt`` fixtures.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tenferro_host import Host
from tenferro_host.testing.pytest_plugin import backend_params

#: The kinds a behaviour test runs on (CUDA's own tests cover it on the GPU machine).
BEHAVIOUR_KINDS = ("cpu", "webgpu")


@functools.cache
def _probing_host() -> Host:
    """The Host whose probes mark the parameters: backends are probed once per test run."""
    return Host()


def kind_params(*kinds: str) -> list[Any]:
    """One ``pytest.param`` per backend kind of ``kinds`` present or marked, CPU first."""
    return backend_params(_probing_host(), list(kinds))


def behaviour_backend_params() -> list[Any]:
    """The parameters of :data:`BEHAVIOUR_KINDS`."""
    return kind_params(*BEHAVIOUR_KINDS)


def available_host(kind: str) -> Host:
    """A fresh Host on which backend ``kind`` is available; where it is not, the calling test is
    skipped with the backend's reason."""
    host = Host()
    status = host.backend_status(kind)
    if not status.available:
        pytest.skip(f"backend {kind!r} unavailable: {status.reason}")
    return host

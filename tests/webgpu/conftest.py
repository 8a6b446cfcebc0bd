"""WebGPU test set-up: one shared runtime on the best adapter (a software one counts).

Every test here is marked ``webgpu`` and skips with the backend's reason only when no adapter
exists. Tests that change runtime state (the fold limit) make their own runtime.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.backends import available_host

from tenferro_host import Host


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/webgpu/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.webgpu)


@pytest.fixture(scope="session")
def webgpu_host() -> Host:
    """The session's Host with WebGPU (every test here skips with its reason where it is not)."""
    return available_host("webgpu")


@pytest.fixture(scope="session")
def rt(webgpu_host: Host) -> Any:
    """The shared ``webgpu`` runtime of the session."""
    return webgpu_host.backend("webgpu")


@pytest.fixture
def fresh_rt(webgpu_host: Host) -> Iterator[Any]:
    """A runtime of its own (own device and allocation domain) for state-changing tests."""
    yield webgpu_host.new_backend("webgpu")

"""pytest plugin of tenferro-host (entry point ``pytest11``): ``host`` and ``backend_name``.

``backend_name`` is parametrised at collection time from the backends of this machine: ``cpu``
always; every other available backend (``cuda``, ``webgpu`` ...) with its marks; ``cuda`` and
``webgpu`` also when unavailable, as a case skipped with the backend's reason — so a machine
with no GPU shows why those cases did not run. Marks: ``cuda`` -> ``cuda`` + ``gpu``;
``webgpu`` -> ``webgpu`` (+ ``gpu`` on a hardware adapter).

Importing this module loads no GPU library: backends are probed only when a test asks for
``backend_name``.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..host import Host
from ..registry import BackendStatus

#: Backend kinds listed even when unavailable (as skipped cases) and their marker names.
_MARKED_KINDS = ("cuda", "webgpu")
_MARKERS = {
    "gpu": "needs a hardware GPU (skipped with a reason when none is present)",
    "cuda": "needs a CUDA device, the driver and the `cuda` extra",
    "webgpu": "needs a WebGPU adapter (a software adapter such as llvmpipe/lavapipe counts)",
    "multi_gpu": "needs two or more GPUs of one host",
}
_PARAMS = pytest.StashKey[list[Any]]()


def pytest_configure(config: pytest.Config) -> None:
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def backend_param(status: BackendStatus) -> Any:
    """The ``backend_name`` case of one backend kind, with its marks (skip when unavailable)."""
    marks: list[Any] = []
    if status.kind in _MARKED_KINDS:
        marks.append(getattr(pytest.mark, status.kind))
    if status.kind == "cuda" or (status.kind != "cpu" and status.available and not status.software):
        marks.append(pytest.mark.gpu)
    if not status.available:
        reason = f"backend {status.kind!r} unavailable: {status.reason}"
        marks.append(pytest.mark.skip(reason=reason))
    return pytest.param(status.kind, marks=marks, id=status.kind)


def backend_params(host: Host) -> list[Any]:
    """Every ``backend_name`` case of this machine, cpu first."""
    statuses = {s.kind: s for s in host.backend_statuses()}
    kinds = ["cpu"] + [k for k in statuses if k != "cpu" and statuses[k].available]
    kinds += [k for k in _MARKED_KINDS if k not in kinds]
    return [backend_param(statuses.get(k) or host.backend_status(k)) for k in kinds]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" not in metafunc.fixturenames:
        return
    stash = metafunc.config.stash
    params = stash.get(_PARAMS, None)
    if params is None:
        params = stash[_PARAMS] = backend_params(Host())  # probed once per test run
    metafunc.parametrize("backend_name", params)


@pytest.fixture
def host() -> Host:
    """A fresh Host: plugins discovered from the installed entry points, no backend created."""
    return Host()


__all__ = ["backend_param", "backend_params", "host"]

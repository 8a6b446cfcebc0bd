"""pytest plugin of tenferro-host (entry point ``pytest11``; ``-p tenferro_host.testing`` when
plugin autoloading is off).

Fixtures: ``host`` (a fresh Host), ``backend_name`` (parametrised over this machine's backends:
``cpu`` always, every other available one with its marks, ``cuda`` and ``webgpu`` also when
unavailable as a case skipped with the backend's reason) and ``backend`` (that backend's
runtime). ``tf_case`` parametrises the tests that :func:`~.conformance.conformance_test`
makes, one item per conformance case. Options: ``--tf-backends=cpu,webgpu,cuda``,
``--tf-variants=cpu,dsl,cuda-raw``, ``--tf-compile-only``. Markers ``gpu``, ``cuda``,
``webgpu``, ``multi_gpu``. While tests run, fresh CPU memory is poisoned (NaN, 0xA5 bytes).

Loaded into every pytest run of an environment that has tenferro-host, so it imports only
pytest: the host (and any backend) is imported when a test asks for it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .._host import Host
    from ..provider._registry import BackendStatus
    from ..provider._runtime import Runtime

#: Backend kinds listed even when unavailable (as skipped cases) and their marker names.
_MARKED_KINDS = ("cuda", "webgpu")
_MARKERS = {
    "gpu": "needs a hardware GPU (skipped with a reason when none is present)",
    "cuda": "needs a CUDA device, the driver and the `cuda` extra",
    "webgpu": "needs a WebGPU adapter (a software adapter such as llvmpipe/lavapipe counts)",
    "multi_gpu": "needs two or more GPUs of one host",
}
_HOST = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tenferro-host")
    group.addoption(
        "--tf-backends",
        default=None,
        metavar="KINDS",
        help="run backend cases only on these backend kinds, e.g. cpu,webgpu",
    )
    group.addoption(
        "--tf-variants",
        default=None,
        metavar="KINDS",
        help="run conformance cases only of these variant kinds, e.g. dsl",
    )
    group.addoption(
        "--tf-compile-only",
        action="store_true",
        default=False,
        help="run only the GPU-less conformance cases (compile, launch arguments)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def _kinds(config: pytest.Config, option: str) -> list[str] | None:
    raw = config.getoption(option)
    return None if raw is None else [k.strip() for k in raw.split(",") if k.strip()]


def _marks(kind: str, status: BackendStatus | None) -> list[Any]:
    marks: list[Any] = []
    if kind in _MARKED_KINDS:
        marks.append(getattr(pytest.mark, kind))
    hardware = status is not None and status.available and not status.software
    if kind == "cuda" or (kind not in ("cpu", "none") and hardware):
        marks.append(pytest.mark.gpu)
    return marks


def backend_param(status: BackendStatus) -> Any:
    """The ``backend_name`` case of one backend kind, with its marks (skip when unavailable)."""
    marks = _marks(status.kind, status)
    if not status.available:
        reason = f"backend {status.kind!r} unavailable: {status.reason}"
        marks.append(pytest.mark.skip(reason=reason))
    return pytest.param(status.kind, marks=marks, id=status.kind)


def backend_params(host: Host, only: list[str] | None = None) -> list[Any]:
    """Every ``backend_name`` case of this machine, cpu first (``only``: these kinds)."""
    statuses = {s.kind: s for s in host.backend_statuses()}
    kinds = ["cpu"] + [k for k in statuses if k != "cpu" and statuses[k].available]
    kinds += [k for k in _MARKED_KINDS if k not in kinds]
    if only is not None:
        kinds = [k for k in kinds if k in only]
    return [backend_param(statuses.get(k) or host.backend_status(k)) for k in kinds]


def _collection_host(config: pytest.Config) -> Host:
    """One Host for collection: backends are probed once per test run."""
    host = config.stash.get(_HOST, None)
    if host is None:
        from .._host import Host

        host = config.stash[_HOST] = Host()
    return host


def case_params(
    config: pytest.Config, ops: tuple[str, ...], attrs: dict[str, Any] | None = None
) -> list[Any]:
    """The ``tf_case`` parameters of conformance tests of ``ops``, marked per backend."""
    from .conformance import cases

    host = _collection_host(config)
    params = []
    for op in ops:
        for case in cases(
            host,
            op,
            backends=_kinds(config, "--tf-backends"),
            variants=_kinds(config, "--tf-variants"),
            compile_only=config.getoption("--tf-compile-only"),
            attrs=attrs,
        ):
            status = host.backend_status(case.backend) if case.backend != "none" else None
            marks = _marks(case.backend, status)
            if case.unavailable is not None:
                marks.append(pytest.mark.skip(reason=case.unavailable))
            params.append(pytest.param(case, marks=marks, id=case.id))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "backend_name" in metafunc.fixturenames:
        params = backend_params(_collection_host(config), _kinds(config, "--tf-backends"))
        metafunc.parametrize("backend_name", params)
    if "tf_case" in metafunc.fixturenames:
        ops = getattr(metafunc.function, "tf_conformance_ops", ())
        attrs = getattr(metafunc.function, "tf_conformance_attrs", None)
        metafunc.parametrize("tf_case", case_params(config, ops, attrs))


@pytest.fixture(autouse=True)
def _tf_poisoned_memory() -> Iterator[None]:
    """Poison fresh CPU memory in tests of projects that use tenferro-host (no import here)."""
    if "tenferro_host._cpu._runtime" not in sys.modules:
        yield
        return
    from .conformance import poison_fresh_memory

    with poison_fresh_memory():
        yield


@pytest.fixture
def host() -> Host:
    """A fresh Host: plugins discovered from the installed entry points, no backend created."""
    from .._host import Host

    return Host()


@pytest.fixture
def backend(host: Host, backend_name: str) -> Runtime:
    """The runtime of ``backend_name`` in ``host``."""
    return host.backend(backend_name)


__all__ = ["backend", "backend_param", "backend_params", "case_params", "host"]

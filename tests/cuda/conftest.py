"""Fixtures of the CUDA tests that run without a GPU."""

from __future__ import annotations

import pytest


@pytest.fixture
def install(monkeypatch):
    """Install a FakeDriver behind drv(); runtimes made through ``make`` are closed after."""
    pytest.importorskip("cuda.bindings.driver")
    from support.driver_stand_in import FakeDriver
    from tenferro_host_cuda import _driver as driver_module
    from tenferro_host_cuda._runtime import CudaRuntime

    made = []

    def _install(devices=2, **kwargs):
        fake = FakeDriver(devices, **kwargs)
        monkeypatch.setattr(driver_module, "_driver", fake)
        return fake

    def make(ordinal, host):
        rt = CudaRuntime(ordinal, host)
        made.append(rt)
        return rt

    _install.make = make
    yield _install
    for rt in made:
        rt.close()

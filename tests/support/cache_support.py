"""Fixtures of the cache tests: each works in its own temporary TENFERRO_CACHE_DIR.

Not a conftest (``tests/conftest.py`` is imported as ``conftest``): a test module binds the
fixtures it needs by name (``cache_dir = cache_support.cache_dir``), the autouse one always.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tenferro_host.provider import _kernel_cache as kc


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache directory for this test, set in the environment (the default bound)."""
    root = tmp_path / "kernel-cache"
    monkeypatch.setenv(kc.ENV_DIR, str(root))
    monkeypatch.delenv(kc.ENV_MAX_BYTES, raising=False)
    monkeypatch.delenv(kc.ENV_SWITCH, raising=False)
    return root


@pytest.fixture
def cache_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The cache's debug lines."""
    caplog.set_level(logging.DEBUG, logger=kc.LOGGER)
    return caplog


@pytest.fixture
def cache(cache_dir: Path) -> kc.KernelCache:
    """The process's cache for this test's directory (what compile_source uses)."""
    found = kc.active_kernel_cache()
    assert found is not None and found.root == cache_dir
    return found

"""The backends a behaviour test runs on: the CPU always, WebGPU where wgpu finds an adapter
(Mesa's llvmpipe counts), each the kit's ``backend_name`` case (marked, and skipped with the
backend's reason where unavailable).

A behaviour every backend shares is one test over these, not a copy per backend directory;
``tests/conftest.py`` hands them out as the ``each_backend`` and ``each_rt`` fixtures.
"""

from __future__ import annotations

import functools
from typing import Any

from tenferro_host import Host
from tenferro_host.testing.pytest_plugin import backend_params

#: The kinds a behaviour test runs on (CUDA's own tests cover it on the GPU machine).
BEHAVIOUR_KINDS = ["cpu", "webgpu"]


@functools.cache
def behaviour_backend_params() -> list[Any]:
    """One ``pytest.param`` per kind of :data:`BEHAVIOUR_KINDS`, probed once per test run."""
    return backend_params(Host(), BEHAVIOUR_KINDS)

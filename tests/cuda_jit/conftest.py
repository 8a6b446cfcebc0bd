"""CUDA JIT test set-up: the ``target`` fixture runs a test on the fake raw seam (CPU, always)
and on CUDA (marked ``gpu`` and ``cuda``; skipped with the reason when no device is present)."""

from __future__ import annotations

import pytest
from support.cuda_jit_harness import TARGETS, Target


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    return Target(request.param)

"""The launch fuzzer of ``bench/fuzz_launches.py``, a few hundred cases per target.

The bench runs it at scale on the GPU machine; here it runs on every backend present, so a
wrong launch that is not a typed error, a wrong result or a fuzzer that no longer launches
anything fails the suite.
"""

from __future__ import annotations

import pytest
from support.backends import available_host
from support.launch_fuzz import fuzz

EXAMPLES = 300


def assert_exercised(tally: dict) -> None:
    """Launches ran, some succeeded and were checked, and many kinds of refusal were seen."""
    assert tally["launches"] >= EXAMPLES * 0.9
    assert tally["ok"] >= EXAMPLES // 10 and tally["checked_results"] >= 5
    for error in ("InvalidLaunchConfigError", "SessionClosedError", "WrongThreadError"):
        assert tally["typed_errors"].get(error, 0) > 0, tally


def test_dsl_launches_on_cpu():
    assert_exercised(fuzz("cpu", "dsl", EXAMPLES, seed=1))


@pytest.mark.webgpu
def test_dsl_launches_on_webgpu():
    available_host("webgpu")
    assert_exercised(fuzz("webgpu", "dsl", EXAMPLES, seed=2))


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("target", ["dsl", "raw"])
def test_launches_on_cuda(target):
    available_host("cuda")
    assert_exercised(fuzz("cuda", target, EXAMPLES, seed=3))

"""Plans shared by the jit sessions of one runtime: a new session's first launch of a known
shape skips the base class's planning (its arguments are still checked and converted), a
shape differing in anything the plan depends on is planned afresh, and the full checks still
refuse what they refused (a float count)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import kernels
from support.cuda_jit_harness import shared_host
from support.jit_fake_raw import FakeRuntimeState, fake_cuda_jit
from tenferro_host_cuda_jit._jit import CudaJitSession

import tenferro_host as tf
from tenferro_host.provider._jit_session import JitSession


@pytest.fixture
def cpu() -> Any:
    return shared_host().backend("cpu")


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts launches that went through the base class's full planning."""
    calls: list[int] = []
    full = JitSession._launch

    def counting(self: Any, *args: Any) -> None:
        calls.append(1)
        full(self, *args)

    monkeypatch.setattr(JitSession, "_launch", counting)
    return calls


def test_a_new_session_reuses_the_runtime_plan(cpu: Any, planned: list[int]) -> None:
    fake = FakeRuntimeState()
    x = cpu.upload(np.arange(40, dtype=np.float32))
    outs = []
    for _ in range(3):
        with fake_cuda_jit(cpu, fake) as js:
            out = js.alloc_output("float32", (40,))
            js.launch(kernels.add, 1, 64, out, x, x)
            outs.append(out)
    assert len(planned) == 1 and fake.compiles == 1 and fake.prepares == 3
    for out in outs:
        np.testing.assert_array_equal(out.download(), 2 * np.arange(40, dtype=np.float32))


def test_other_shapes_and_grid_limits_are_planned_afresh(
    cpu: Any, planned: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeRuntimeState()
    x = cpu.upload(np.arange(40, dtype=np.float32))
    with fake_cuda_jit(cpu, fake) as js:
        js.launch(kernels.add, 1, 64, js.alloc_output("float32", (40,)), x, x)
    with fake_cuda_jit(cpu, fake) as js:
        js.launch(kernels.add, 2, 32, js.alloc_output("float32", (40,)), x, x)  # other count
    monkeypatch.setattr(CudaJitSession, "max_grid_override", (4, 4, 4))
    with fake_cuda_jit(cpu, fake) as js:
        js.launch(kernels.add, 1, 64, js.alloc_output("float32", (40,)), x, x)  # other limits
    assert len(planned) == 3


def test_the_full_checks_still_refuse_a_float_count(cpu: Any) -> None:
    fake = FakeRuntimeState()
    x = cpu.upload(np.arange(4, dtype=np.float32))
    with fake_cuda_jit(cpu, fake) as js:
        js.launch(kernels.add, 1, 64, js.alloc_output("float32", (4,)), x, x)
    with fake_cuda_jit(cpu, fake) as js, pytest.raises(tf.InvalidLaunchConfigError):
        js.launch(kernels.add, 1.0, 64, js.alloc_output("float32", (4,)), x, x)


def test_a_float_count_is_refused_after_the_same_int_launch_in_one_session(cpu: Any) -> None:
    fake = FakeRuntimeState()
    x = cpu.upload(np.arange(4, dtype=np.float32))
    with fake_cuda_jit(cpu, fake) as js:
        out = js.alloc_output("float32", (4,))
        js.launch(kernels.add, 1, 64, out, x, x)
        with pytest.raises(tf.InvalidLaunchConfigError):  # not a replay of the int launch
            js.launch(kernels.add, 1.0, 64, out, x, x)

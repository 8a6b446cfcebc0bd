"""Targets for the CUDA JIT tests: the real CUDA runtime, or the fake raw seam on the CPU.

Both give a ``jit()`` context (a :class:`CudaJitSession`) and a runtime to upload to and
download from; :func:`assert_same` runs one launch there and on the CPU interpreter from the
same starting storages (:class:`View` s, shared with the WebGPU tests) and compares them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from support import webgpu_harness as harness
from support.cuda_support import cuda_runtime, shared_host
from support.dsl_harness import View
from support.jit_fake_raw import FakeRuntimeState, fake_cuda_jit
from tenferro_host import kernel as K

OP = "tests.cuda_jit"
#: Parameters of the ``target`` fixture: the fake seam always, CUDA when a device is present.
TARGETS = [
    pytest.param("fake", id="fake-raw-on-cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.cuda]),
]


class Target:
    """Where a CUDA JIT session runs: ``rt`` holds the tensors, ``jit()`` opens the session."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "cuda":
            self.rt = cuda_runtime()
            self.fake: FakeRuntimeState | None = None
        else:
            self.rt = shared_host().backend("cpu")
            self.fake = FakeRuntimeState()

    @contextmanager
    def jit(self, op: str = OP) -> Iterator[Any]:
        if self.fake is not None:
            with fake_cuda_jit(self.rt, self.fake, op) as js:
                yield js
            return
        with self.rt.session() as s, tf.cuda.exec_session(s).jit(op) as js:
            yield js


def on_target(
    target: Target, kernel: K.Kernel, count: Any, dim: Any, *args: Any, **consts: Any
) -> list[np.ndarray]:
    """Upload the distinct storages, launch once with views of them, download them."""
    return harness.on_target(target.rt, target.jit, kernel, count, dim, *args, **consts)


def assert_same(target: Target, kernel: K.Kernel, *launch: Any, **options: Any) -> None:
    """The launch (:func:`~support.webgpu_harness.assert_same_on`'s count, dim, arguments and
    keywords) leaves the same storages on ``target`` as on the interpreter."""
    harness.assert_same_on(target.rt, target.jit, kernel, *launch, **options)


__all__ = [
    "OP",
    "TARGETS",
    "Target",
    "View",
    "assert_same",
    "cuda_runtime",
    "on_target",
    "shared_host",
]

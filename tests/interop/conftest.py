"""Ops the bridge tests register on the bridges' process-wide host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.interop._hosts import default_host


def _passthrough(ex: Any, x: tf.Tensor) -> tf.Tensor:
    """A variant whose output is its input: the bridges must copy it (no aliasing)."""
    return x


def _transposed(ex: Any, x: tf.Tensor) -> tf.Tensor:
    """A variant whose output is a non-compact view of a fresh allocation."""
    buf = ex.runtime.empty(x.dtype, x.shape)
    tf.cpu.CpuRuntime.strided_view(buf)[...] = tf.cpu.CpuRuntime.strided_view(x)
    return buf.T


def _scaled(ex: Any, x: tf.Tensor, factor: float = 1.0) -> tf.Tensor:
    """A variant whose output it allocates (column-major) and writes."""
    out = ex.alloc_output(x.dtype, x.shape)
    tf.cpu.CpuRuntime.strided_view(out)[...] = tf.cpu.CpuRuntime.strided_view(x) * factor
    return out


def _ones(ex: Any, n: int) -> tf.Tensor:
    """A variant with no tensor inputs: the bridges name its backend."""
    return ex.runtime.upload(np.ones(n, np.float32))


@pytest.fixture(scope="session", autouse=True)
def _own_inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """torch's inductor caches compiled graphs on disk, keyed without a custom op's fake
    kernel: a graph compiled by another checkout (another output layout) would be replayed
    with its stride asserts. The tests compile into a cache of their own."""
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("inductor"))
    yield
    if saved is None:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def bridge_host() -> tf.Host:
    """The bridges' default host, with the test package ``tfx`` registered once."""
    host = default_host()
    if "tfx.passthrough" not in host.registry.ops:
        view = host.registry.staging("tfx")
        view.add_op(
            tf.OpSpec(
                name="tfx.passthrough",
                signature=tf.Signature(inputs=("x",)),
                reference=lambda x: x,
                variants={"cpu": _passthrough},
            )
        )
        view.add_op(
            tf.OpSpec(
                name="tfx.transpose",
                signature=tf.Signature(inputs=("x",), shape_rule=lambda x: (x[1], x[0])),
                reference=lambda x: np.ascontiguousarray(x.T),
                variants={"cpu": _transposed},
            )
        )
        view.add_op(
            tf.OpSpec(
                name="tfx.scale",
                signature=tf.Signature(inputs=("x",), attributes={"factor": float, "axes": object}),
                reference=lambda x, factor=1.0, axes=None: x * factor,
                variants={
                    "cpu": lambda ex, x, factor=1.0, axes=None: ex.runtime.upload(
                        x.download() * factor
                    )
                },
            )
        )
        view.add_op(
            tf.OpSpec(
                name="tfx.scale_cm",  # exported column-major (one layout per operator)
                signature=tf.Signature(inputs=("x",), attributes={"factor": float}),
                reference=lambda x, factor=1.0: x * factor,
                variants={"cpu": _scaled},
            )
        )
        view.add_op(
            tf.OpSpec(
                name="tfx.ones",
                signature=tf.Signature(
                    inputs=(),
                    attributes={"n": int},
                    dtype_rule=lambda n: "float32",
                    shape_rule=lambda n: (n,),
                ),
                reference=lambda n: np.ones(n, np.float32),
                variants={"cpu": _ones},
            )
        )
        view.commit()
    return host

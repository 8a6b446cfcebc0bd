# DSL annotations (K.Array[K.F]) are not Python types.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""What ``handle.plans()`` says on WebGPU (llvmpipe here) when a call cannot be replayed because
one of its outputs is empty: that reason, not "backend 'webgpu' has no op replay"."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import _op_plan

PAIR = "tests_wgpu_plan_states.copy_and_empty"


@K.kernel
def copy_kernel(out: K.Array[K.F], x: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i]


def _copy_and_empty(ex: Any, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A copy of ``x`` (one DSL dispatch) and an empty second output."""
    with ex.jit(PAIR) as js:
        out, empty = js.alloc_output(x.dtype, x.shape), js.alloc_output(x.dtype, (0,))
        js.launch(copy_kernel, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, x)
    return out, empty


def test_an_empty_output_is_the_reason_given(
    webgpu_host: tf.Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_op_plan, "ENABLED", True)
    if PAIR not in webgpu_host.registry.ops:
        view = webgpu_host.registry.staging("tests_wgpu_plan_states")
        view.add_op(
            tf.OpSpec(
                name=PAIR,
                signature=tf.Signature(
                    inputs=("x",), outputs=("copy", "empty"), shape_rule=lambda x: (x, (0,))
                ),
                reference=lambda x: x,
                variants={"dsl": _copy_and_empty},
            )
        )
        view.commit()
    x = webgpu_host.backend("webgpu").upload(np.arange(5, dtype=np.float32))
    for _ in range(3):
        copy, empty = webgpu_host.run(PAIR, x)
    assert copy.download().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and empty.shape == (0,)
    (state,) = webgpu_host.op(PAIR).plans().values()
    assert state == (
        "full path: its output of shape (0,) is empty (a replay allocates no empty output)"
    )

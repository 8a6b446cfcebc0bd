"""ext_add_kernel's ``dsl`` variant: called through ``ex.jit`` on the CPU (host.run there picks the
``cpu`` variant) and on CUDA (host.run there picks ``cuda-raw``; the dsl variant is called
explicitly too)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ext_add_kernel import DTYPES, dsl
from ext_add_kernel.plugin import VARIANTS
from support.cuda_jit_harness import cuda_runtime, shared_host

import tenferro_host as tf

OP = "ext_add_kernel.add"
SHAPES = [(), (0,), (1,), (1000,), (33, 17), (7, 0, 2), (4, 5, 6)]


def operands(shape: tuple[int, ...], dtype: str, seed: int = 0) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    a, b = (np.abs(rng.standard_normal(shape) * 100).astype(dtype) for _ in range(2))
    return a, -b if np.dtype(dtype).kind != "u" else b


def run_dsl(rt: Any, lhs: Any, rhs: Any) -> Any:
    exec_session = tf.cuda.exec_session if rt.kind == "cuda" else tf.cpu.exec_session
    with rt.session() as s:
        return VARIANTS["dsl"](exec_session(s), lhs, rhs)


def test_the_dsl_variant_is_registered() -> None:
    assert VARIANTS["dsl"] is dsl.add
    assert shared_host().registry.op(OP).spec.variants["dsl"] is dsl.add


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_dsl_variant_on_cpu(shape: tuple[int, ...], dtype: str) -> None:
    cpu = shared_host().backend("cpu")
    a, b = operands(shape, dtype)
    out = run_dsl(cpu, cpu.upload(a), cpu.upload(b))
    assert out.is_compact() and out.shape == shape and out.storage.domain == cpu.domain
    np.testing.assert_array_equal(out.download(), a + b)


def test_dsl_variant_canonicalizes_views() -> None:
    cpu = shared_host().backend("cpu")
    m = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = cpu.upload(m)
    out = run_dsl(cpu, t.T, t.T)
    np.testing.assert_array_equal(out.download(), m.T + m.T)
    out = run_dsl(cpu, t[1:3], t[2:4])
    np.testing.assert_array_equal(out.download(), m[1:3] + m[2:4])


def test_dsl_variant_errors_are_the_ops() -> None:
    cpu = shared_host().backend("cpu")
    with pytest.raises(tf.ShapeError) as info:
        run_dsl(cpu, cpu.zeros("float32", (3,)), cpu.zeros("float32", (2,)))
    assert (info.value.op, info.value.argument) == (OP, "rhs")


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_dsl_variant_on_cuda(shape: tuple[int, ...], dtype: str) -> None:
    rt = cuda_runtime()
    a, b = operands(shape, dtype)
    lhs, rhs = rt.upload(a), rt.upload(b)
    out = run_dsl(rt, lhs, rhs)
    assert out.is_compact() and out.storage.domain == rt.domain
    np.testing.assert_array_equal(out.download(), a + b)
    np.testing.assert_array_equal(run_dsl(rt, lhs.T, rhs.T).download(), a.T + b.T)


@pytest.mark.gpu
@pytest.mark.cuda
def test_host_run_on_cuda_prefers_cuda_raw_and_agrees_with_dsl() -> None:
    rt = cuda_runtime()
    host = shared_host()
    assert host.variants_by_backend(OP)["cuda"] == "cuda-raw"
    a, b = operands((257, 3), "float32", seed=1)
    lhs, rhs = rt.upload(a), rt.upload(b)
    np.testing.assert_array_equal(host.run(OP, lhs, rhs).download(), a + b)
    np.testing.assert_array_equal(run_dsl(rt, lhs, rhs).download(), a + b)

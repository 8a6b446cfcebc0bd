"""The example op ``ext_add_kernel.add``: its ``dsl`` variant runs on WebGPU through host.run."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from support.subprocesses import Subprocess

import tenferro_host as tf

OP = "ext_add_kernel.add"


@pytest.fixture
def dsl_op(webgpu_host: Any) -> str:
    variants = webgpu_host.variants_by_backend(OP)
    assert variants.get("webgpu") == "dsl", variants
    return OP


@pytest.mark.parametrize("shape", [(0,), (1,), (1000,), (33, 17)])
def test_host_run_uses_the_dsl_variant_on_webgpu(
    webgpu_host: Any, rt: Any, dsl_op: str, shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    before = rt.stats()
    out = webgpu_host.run(dsl_op, rt.upload(a), rt.upload(b))
    assert isinstance(out, tf.Tensor) and out.storage.domain == rt.domain
    after = rt.stats()
    assert after["uploads"] == before["uploads"] + (2 if a.size else 0)
    assert after["downloads"] == before["downloads"]
    np.testing.assert_array_equal(out.download(), a + b)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
def test_views_and_integer_dtypes(webgpu_host: Any, rt: Any, dsl_op: str, dtype: str) -> None:
    a = np.arange(35).reshape(5, 7).astype(dtype)
    b = (3 * np.arange(35)).reshape(7, 5).astype(dtype)
    out = webgpu_host.run(dsl_op, rt.upload(a)[:, ::2], rt.upload(b).T[:, ::2])
    np.testing.assert_array_equal(out.download(), a[:, ::2] + b.T[:, ::2])


def test_cli_runs_the_op_on_the_software_adapter(dsl_op: str, subproc: Subprocess) -> None:
    options = ("--shape", "1000", "--repeat", "2", "--check", "--json")
    proc = subproc.cli("run", dsl_op, "--backend", "webgpu", *options)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["backend"] == "webgpu:0" and report["variant"] == "dsl"

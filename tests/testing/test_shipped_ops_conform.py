"""`tenferro-host check` and `run --check` pass every op the project ships at several shapes,
with the op's declared shapes and tolerance rule; a wrong matmul still fails."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host._cli import main

LINALG = (
    "linalg.matmul",
    "linalg.batched_matmul",
    "linalg.tensordot",
    "linalg.einsum",
    "linalg.qr",
    "linalg.svd",
)


def _cli(capsys, *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def test_check_passes_linalg_and_the_example(capsys):
    """Every linalg op and the example pass `check`: the contractions and factorizations on
    every GPU-less backend; the reductions on webgpu (DSL) and with their cpu variant (their
    DSL kernel on the CPU interpreter costs about 40 s per large shape: run
    `tenferro-host check linalg.sum` for that one)."""
    for argv in (
        (*LINALG, "ext_add_kernel.add"),
        ("linalg.sum", "linalg.norm", "--backends", "webgpu"),
        ("linalg.sum", "linalg.norm", "--variants", "cpu"),
    ):
        code, report = _cli(capsys, "check", *argv, "--json")
        bad = [c for c in report["cases"] if c["status"] in ("failed", "error")]
        passed = [c for c in report["cases"] if c["status"] == "passed"]
        assert code == 0 and not bad and passed, (argv, bad)


RUNS = [
    ("linalg.matmul", "64,64", ()),
    ("linalg.matmul", "33,17", ()),
    ("linalg.batched_matmul", "9,5,3", ()),
    ("linalg.einsum", "4,300", ("--attr", "spec=ij,jk->ik")),
    ("linalg.tensordot", "5,7", ()),
    ("linalg.sum", "300,7", ()),
    ("linalg.norm", "1000", ()),
    ("ext_add_kernel.add", "3,5", ()),
    ("ext_add_kernel.add", "100003", ()),
]
#: The factorizations have no DSL variant: cpu only (cuda is the lead's GPU run).
CPU_ONLY = [("linalg.qr", "40,9", ()), ("linalg.svd", "17,3", ())]


@pytest.mark.parametrize(
    ("op", "shape", "attrs", "backend"),
    [(*r, b) for r in RUNS for b in ("cpu", "webgpu")] + [(*r, "cpu") for r in CPU_ONLY],
)
def test_run_check_passes_shipped_ops(capsys, host, op, shape, attrs, backend):
    if not host.backend_status(backend).available:
        pytest.skip(host.backend_status(backend).reason)
    argv = ["run", op, "--backend", backend, "--shape", shape, "--check", "--repeat", "1"]
    code, result = _cli(capsys, *argv, *attrs, "--json")
    assert code == 0 and result["check"] == "passed", result


def test_run_defaults_to_a_declared_shape(capsys):
    code, result = _cli(capsys, "run", "linalg.svd", "--check", "--repeat", "1", "--json")
    assert code == 0 and result["shapes"] == [[512, 256]], result


def test_the_matmul_rule_passes_webgpu_and_fails_a_wrong_matmul(host):
    """64x64 on webgpu differed by 4e-5 relative where cancellation makes a value small: the
    rule (rtol, atol grown by sqrt(k)) passes it; an off-by-one-term product still fails."""
    spec = host.registry.op("linalg.matmul").spec
    rtol, atol = spec.tolerance("float32", [(64, 64), (64, 64)])
    assert rtol == pytest.approx(8e-4) and atol == pytest.approx(8e-4)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    wrong = a[:, :-1] @ b[:-1, :]
    close = np.isclose(wrong, a @ b, rtol=rtol, atol=atol)
    assert not close.all()
    from tenferro_host.testing.checks import compare_outputs

    problem = compare_outputs([wrong], [a @ b], ("out",), spec=spec, shapes=[a.shape, b.shape])
    assert problem is not None and "differs from the reference" in problem
    assert tf.Host  # the host fixture loaded linalg

"""The benchmark suite runs on a CUDA machine: every tenferro row is measured, a baseline is
measured or says why not, nothing fails (no figure is asserted: benchmarks are not tests)."""

from __future__ import annotations

import pytest
from cuda_support import cuda_runtime

from tenferro_host import benchmarks
from tenferro_host.benchmarks import cases

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

OURS = {
    cases.PREPARED,
    cases.RS_LAUNCH,
    cases.BACKEND_SESSION,
    cases.RAW_SESSION,
    cases.RAW_BODY,
    cases.ALLOC_OUTPUT,
    cases.BORROW,
    cases.BORROW_MUT,
    cases.HOST_RUN_RAW,
    cases.HANDLE_RAW,
    cases.HOST_RUN_DSL,
    cases.DSL_SESSION_OP,
    cases.DSL_CACHED,
    cases.CORE_LAUNCH,
    cases.BW_SEAM,
    cases.BW_DSL,
    cases.NVRTC_COLD,
    cases.NVRTC_HIT,
    cases.MODULE_HIT,
    cases.XB_CUDA,
}


def test_a_quick_cuda_run_measures_every_tenferro_row(tmp_path, monkeypatch):
    cuda_runtime()  # skips without a device

    def skipped(*_: object) -> None:
        raise ImportError("left out of this test (the full bench runs it)")

    for slow in ("_torch_add", "_triton_add", "_cupyx_jit_add", "_numba_add"):
        monkeypatch.setattr(cases, slow, skipped)  # their compiles take most of a run
    done = benchmarks.run(
        quick=True,
        report_path=tmp_path / "performance.md",
        only=("cuda", "cuda-bandwidth", "dsl-backends", "compile"),
    )
    rows = {r.name: r for r in done["results"]}
    failed = {name: r.note for name, r in rows.items() if r.status == "failed"}
    assert not failed
    assert {name for name in OURS if rows[name].status != "ok"} == set()
    assert all(r.note for r in rows.values() if r.status == "not run")
    verdicts = {t["row"]: t["verdict"] for t in done["targets"]}
    assert verdicts[cases.HOST_RUN_RAW] in ("met", "missed")

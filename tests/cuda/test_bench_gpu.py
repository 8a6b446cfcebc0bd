"""The benchmark suite runs on a CUDA machine: every tenferro row is measured, a baseline is
measured or says why not, nothing fails (no figure is asserted: benchmarks are not tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.cuda_support import cuda_runtime

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


# The bench runs in its own process: CuPy is first touched there inside host sessions, which
# restore "no current context" on exit as the contract says; CuPy's next kernel load in *this*
# process would then fail with CUDA_ERROR_INVALID_CONTEXT (see docs/custom-cuda-kernels.md).
QUICK_RUN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from tenferro_host import benchmarks
    from tenferro_host.benchmarks import cases

    def skipped(*_):
        raise ImportError("left out of this test (the full bench runs it)")

    for slow in ("_torch_add", "_triton_add", "_cupyx_jit_add", "_numba_add"):
        setattr(cases, slow, skipped)  # their compiles take most of a run
    done = benchmarks.run(
        quick=True,
        report_path=Path(sys.argv[1]) / "performance.md",
        only=("cuda", "cuda-bandwidth", "dsl-backends", "compile"),
    )
    rows = [(r.name, r.status, r.note) for r in done["results"]]
    verdicts = {t["row"]: t["verdict"] for t in done["targets"]}
    print(json.dumps({"rows": rows, "verdicts": verdicts}))
    """
)


def test_a_quick_cuda_run_measures_every_tenferro_row(tmp_path):
    cuda_runtime()  # skips without a device
    proc = subprocess.run(
        [sys.executable, "-c", QUICK_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = {name: (status, note) for name, status, note in done["rows"]}
    failed = {name: note for name, (status, note) in rows.items() if status == "failed"}
    assert not failed
    assert {name for name in OURS if rows[name][0] != "ok"} == set()
    assert all(note for status, note in rows.values() if status == "not run")
    assert done["verdicts"][cases.HOST_RUN_RAW] in ("met", "missed")


def test_the_first_call_bench_runs_and_reports_its_floor():
    """bench/first_call.py: fresh processes of both kinds, the floor and the imports named."""
    from pathlib import Path

    cuda_runtime()  # skips without a device
    script = Path(__file__).parents[2] / "bench" / "first_call.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--runs", "2"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "above the bare load + launch floor" in proc.stdout
    assert "modules the first call imported" in proc.stdout

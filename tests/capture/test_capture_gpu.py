"""``ex.capture()`` on a real CUDA device (the replayed form today): replays equal eager runs of
the cuda-raw and DSL adds on new pointers, the lock holds against another thread, and the bench
rows run beside cuda.core's graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.capture_support import while_capturing
from support.cuda_support import cuda_runtime, shared_host

import tenferro_host as tf

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

ADD = "ext_add_kernel.add"
DSL_ONLY = "capture_gpu.dsl_add"
BENCH = Path(__file__).parents[2] / "bench" / "capture_bench.py"


def _dsl_add(ex, lhs, rhs):
    from ext_add_kernel import dsl

    return dsl.add(ex, lhs, rhs)


@pytest.fixture(scope="module")
def rt():
    host = shared_host()
    if DSL_ONLY not in host.registry.ops:
        view = host.registry.staging("capture-gpu-tests")
        view.add_op(
            tf.OpSpec(
                name=DSL_ONLY,
                signature=tf.Signature(inputs=("lhs", "rhs")),
                reference=lambda a, b: a + b,
                variants={"dsl": _dsl_add},
            )
        )
        view.commit()
    return cuda_runtime()


@pytest.mark.parametrize("op", [ADD, DSL_ONLY])
def test_replay_equals_eager_on_new_pointers(rt, op):
    host = shared_host()
    a, b = (rt.upload(np.arange(4096, dtype=np.float32) * k) for k in (1, 3))
    host.run(op, a, b)  # the warm-up
    with rt.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            t = a
            for _ in range(10):
                t = ex.run(op, t, b)
    graph = cap.graph(inputs=(a, b), outputs=(t,))
    for k in range(3):
        x, y = (rt.upload(np.random.default_rng(k).random(4096, np.float32)) for _ in range(2))
        eager = x
        for _ in range(10):
            eager = host.run(op, eager, y)
        np.testing.assert_allclose(graph.replay(x, y).download(), eager.download(), rtol=1e-6)


def test_the_lock_holds_against_another_thread_on_the_device(rt):
    host = shared_host()
    a = rt.upload(np.ones(256, np.float32))
    for _ in range(3):
        host.run(ADD, a, a)  # planned: the replay path is the one that must not slip through
    cap, seen = while_capturing(rt, lambda ex: ex.run(ADD, a, a), lambda: host.run(ADD, a, a))
    assert isinstance(seen[0], tf.CaptureError) and "locked" in str(seen[0])
    assert cap.graph(inputs=(a,)).ops == (ADD,)


def test_the_bench_rows_run_beside_cuda_cores_graph(rt, tmp_path):
    out = tmp_path / "capture.json"
    subprocess.run(
        [sys.executable, str(BENCH), "--backend", "cuda", "--rounds", "5", "--json", str(out)],
        check=True,
    )
    rows = {r["row"]: r for r in json.loads(out.read_text())}
    assert rows["recaptures when only values change"]["count"] == 0
    assert "cuda.core graph of 100 launches (floor)" in rows
    print(json.dumps(list(rows.values()), indent=2))

"""The capture bench runs anywhere (CPU here): its replay agrees with eager calls and only
changed values never recapture. No figure is asserted (benchmarks are not tests)."""

from __future__ import annotations

from tenferro_host.benchmarks import capture as capture_bench


def test_the_capture_bench_rows_run_on_the_cpu():
    found = capture_bench.rows("cpu", rounds=1)
    rows = {r["row"]: r for r in found}
    assert not [r for r in found if "failed" in r]
    assert rows["recaptures when only values change"]["count"] == 0
    assert {r["form"] for r in rows.values() if "form" in r} == {"replayed"}
    assert "us_per_op" in rows["the same 100 ops eager (host.run)"]
    for row in (capture_bench.REPLAY_1, capture_bench.SCALAR_SAME, capture_bench.SCALAR_NEW):
        assert "us_per_op" in rows[row], row
    verdicts = {t["target"]: t["verdict"] for t in capture_bench.targets(found)}
    assert verdicts["recaptures when only values change"] == "met"
    assert len(verdicts) == 3  # the floors' targets are CUDA's


def test_a_failing_row_is_reported_and_the_others_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("capture refused")

    monkeypatch.setattr(capture_bench, "capture_chain", refuse)
    rows = {r["row"]: r for r in capture_bench.rows("cpu", rounds=1)}
    assert rows[capture_bench.REPLAY_100]["failed"] == "RuntimeError: capture refused"
    assert rows[capture_bench.REPLAY_100]["form"] == "not captured"
    assert "us_per_op" in rows[capture_bench.EAGER]

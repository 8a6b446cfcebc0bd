"""The capture bench runs anywhere (CPU here): its replay agrees with eager calls and only
changed values never recapture. No figure is asserted (benchmarks are not tests)."""

from __future__ import annotations

import capture_bench


def test_the_capture_bench_rows_run_on_the_cpu():
    rows = {r["row"]: r for r in capture_bench.rows("cpu", rounds=1)}
    assert rows["recaptures when only values change"]["count"] == 0
    assert {r["form"] for r in rows.values() if "form" in r} == {"replayed"}
    assert "the same 100 ops eager (host.run)" in rows

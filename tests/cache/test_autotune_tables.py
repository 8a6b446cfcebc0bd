"""``tenferro-host cache tables``: the learned winners (with their device keys) and the shipped
tables, those of this process's autotuned kernels and those in the plugins' packages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import cache_support

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host._cli import main
from tenferro_host.benchmarks import gemm
from tenferro_host.provider import _tuning_tables as tables

cache_dir = cache_support.cache_dir


def first_wins(js: Any, config: K.Config, run: Callable[[], None]) -> float:
    run()
    return 1.0 if config == gemm.GEMM_CONFIGS[0] else 2.0


def test_cache_tables_lists_learned_and_shipped_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = tmp_path / "gemm.autotune.json"
    shipped.write_text(
        json.dumps(
            {
                "format": 1,
                "kernels": {
                    "tiled_gemm": [
                        {
                            "device": {"target": "cuda", "arch": "sm_90"},
                            "config": gemm.GEMM_CONFIGS[3].plain(),
                        }
                    ]
                },
            }
        )
    )
    tuned = gemm.TILED_GEMM.autotuned(timer=first_wins, warmup=1, repeats=1, table=shipped)
    rt = tf.Host().backend("cpu")
    with rt.session() as s, s.exec_session().jit("test.tables") as js:
        c = js.alloc_output("float32", (8, 8))
        a = rt.upload(np.ones((8, 8), np.float32))
        gemm.TILED_GEMM.launch_tuned(js, c, a, a, tuned)
    assert main(["cache", "tables", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]
    by_source = {r["source"]: r for r in rows if r.get("where", "").startswith(str(tmp_path))}
    learned, listed = by_source["learned"], by_source["shipped"]
    assert learned["device"] == {
        "target": "cpu",
        "name": tables.device_key("cpu", rt.device_info)["name"],
    }
    assert learned["key"] == {"a": "float32[8, 8]", "b": "float32[8, 8]"}
    assert learned["config"] == gemm.GEMM_CONFIGS[0].plain()
    assert (
        listed["device"] == {"target": "cuda", "arch": "sm_90"} and listed["kernel"] == "tiled_gemm"
    )
    assert main(["cache", "tables"]) == 0
    text = capsys.readouterr().out
    assert "learned" in text and "shipped" in text and "sm_90" in text


def test_tables_in_a_package_and_a_broken_one_are_listed(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    good = tmp_path / "pkg" / "sub" / "k.autotune.json"
    good.write_text(json.dumps({"format": 1, "kernels": {"k": [{"config": {"constants": {}}}]}}))
    broken = tmp_path / "pkg" / "b.autotune.json"
    broken.write_text("[]")
    found = tables.tables_in([tmp_path / "pkg"])
    assert sorted(found) == sorted([good, broken])
    rows = tables.shipped_tables(found)
    assert [r["kernel"] for r in rows if "kernel" in r] == ["k"]
    assert any("cannot be used" in r.get("error", "") for r in rows)

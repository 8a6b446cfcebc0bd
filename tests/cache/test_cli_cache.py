"""``tenferro-host cache stats|prune|clear|path``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import cache_support

from tenferro_host._cli import main
from tenferro_host.provider import CachedKernel, KernelCache, KernelKey

cache_dir = cache_support.cache_dir


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["cache", *args, "--json"]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def fill(cache_dir: Path, n: int) -> KernelCache:
    cache = KernelCache(cache_dir)
    for i in range(n):
        key = KernelKey("test", f"k{i}.cu", {"source": str(i)})
        cache.load_or_build(key, lambda: CachedKernel(b"x" * 100, {}))
    return cache


def test_path(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(cache_dir)
    assert cli_json(capsys, "path") == {"path": str(cache_dir), "enabled": True}


def test_stats_prune_clear(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(cache_dir, 3)
    stats = cli_json(capsys, "stats")
    assert stats["entries"] == 3 and stats["misses"] == 3 and stats["hits"] == 0
    assert isinstance(stats["bytes"], int) and stats["bytes"] > 300
    assert isinstance(stats["oldest"], str) and {"evictions", "max_bytes"} <= stats.keys()
    assert cli_json(capsys, "prune") == {
        "path": str(cache_dir),
        "enabled": True,
        "corrupt": 0,
        "temp_files": 0,
        "evicted": 0,
    }
    assert cli_json(capsys, "clear")["removed"] == 3
    assert cli_json(capsys, "stats")["entries"] == 0


def test_prune_applies_the_environment_bound(
    cache_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(cache_dir, 4)
    one = cli_json(capsys, "stats")["bytes"]
    assert isinstance(one, int)
    monkeypatch.setenv("TENFERRO_CACHE_MAX_BYTES", str(one // 2))
    assert cli_json(capsys, "prune")["evicted"] == 2
    assert cli_json(capsys, "stats")["entries"] == 2


def test_table_output_names_every_figure(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(cache_dir, 1)
    assert main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    for word in ("entries", "bytes", "hits", "misses", "evictions", "oldest", str(cache_dir)):
        assert word in out


def test_cache_off_is_reported(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENFERRO_CACHE", "off")
    assert cli_json(capsys, "stats")["enabled"] is False


def test_a_bad_bound_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENFERRO_CACHE_MAX_BYTES", "lots")
    assert main(["cache", "stats"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tenferro-host: error:") and "TENFERRO_CACHE_MAX_BYTES" in err
    assert len(err.splitlines()) == 1


def test_an_unusable_directory_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    monkeypatch.setenv("TENFERRO_CACHE_DIR", str(path))
    assert main(["cache", "clear"]) == 2
    err = capsys.readouterr().err.strip()
    assert "`cache clear` cannot use the kernel cache" in err and str(path) in err
    assert len(err.splitlines()) == 1

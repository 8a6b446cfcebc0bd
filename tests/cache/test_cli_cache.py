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
    assert cli_json(capsys, "path") == {
        "path": str(cache_dir),
        "enabled": True,
        "trust": "trusted (not created yet)",
    }


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


@pytest.mark.parametrize(
    "variable, value", [("TENFERRO_CACHE_MAX_BYTES", "lots"), ("TENFERRO_CACHE", "maybe")]
)
@pytest.mark.parametrize("action", ["stats", "path", "prune", "clear"])
def test_a_bad_setting_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    action: str,
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["cache", action, "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("tenferro-host: error:") and f"{variable}={value!r}" in err
    assert len(err.splitlines()) == 1  # and --json's one document on stdout is the error's
    assert err.endswith(json.loads(captured.out)["error"]["message"])


def test_path_and_stats_say_whether_the_directory_is_trusted(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(cache_dir, 1)
    assert cli_json(capsys, "stats")["trust"] == "trusted"
    cache_dir.chmod(0o777)
    for action in ("path", "stats"):
        trust = cli_json(capsys, action)["trust"]
        assert isinstance(trust, str) and trust.startswith(f"refused: {cache_dir} is writable")
        assert f"chmod 700 {cache_dir}" in trust
    assert main(["cache", "path"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(cache_dir)  # still only the path: $(tenferro-host cache path)
    assert err.startswith("trust: refused:")
    assert main(["cache", "stats"]) == 0
    assert "trust: refused:" in capsys.readouterr().out


def test_a_shared_directory_can_be_cleared_but_not_pruned(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(cache_dir, 2)
    cache_dir.chmod(0o777)
    assert main(["cache", "prune"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not private" in err and "cache clear" in err and len(err.splitlines()) == 1
    assert cli_json(capsys, "clear")["removed"] == 2


def test_stray_directories_in_entries_are_pruned_and_cleared(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not an entry, so prune drops it; clear removes everything in ``entries/``."""
    cache = fill(cache_dir, 3)
    entry = next(p for p in (cache_dir / "entries").rglob("*") if p.is_file())
    (entry.parent / "stray_dir" / "inside").mkdir(parents=True)
    (cache_dir / "entries" / "zz_stray").write_text("a file where a shard belongs")
    assert cli_json(capsys, "prune")["corrupt"] == 2
    assert not (entry.parent / "stray_dir").exists()
    assert cli_json(capsys, "stats")["entries"] == 3
    (entry.parent / "stray_dir").mkdir()
    assert cli_json(capsys, "clear")["removed"] == 3
    left = [p for p in (cache_dir / "entries").rglob("*") if p.parent != cache_dir / "entries"]
    assert left == []  # no entry, no stray directory: only the (empty) shards stay
    assert cache.stats()["entries"] == 0


def test_a_directory_where_an_entry_belongs_is_replaced_by_the_entry(cache_dir: Path) -> None:
    """Found in a fuzzing round: it made every process stop writing the cache."""
    key = KernelKey("test", "k.cu", {"source": "a"})
    path = cache_dir / "entries" / key.digest[:2] / key.digest
    (path / "inside").mkdir(parents=True)
    for d in (cache_dir, cache_dir / "entries", path.parent):
        d.chmod(0o700)
    cache = KernelCache(cache_dir)
    assert cache.load_or_build(key, lambda: CachedKernel(b"built", {})).payload == b"built"
    assert path.is_file()
    assert KernelCache(cache_dir).load_or_build(
        key, lambda: CachedKernel(b"again", {})
    ).payload == (b"built")


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

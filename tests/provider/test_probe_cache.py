"""The probe cache: an answer is kept under its files and facts, asked again when a file
changes or when refreshed, never stored when the probe fails, and off with the switch."""

from __future__ import annotations

import os

import pytest

from tenferro_host.provider import _probe_cache
from tenferro_host.provider._probe_cache import ENV_SWITCH, cached_probe


@pytest.fixture
def probes(tmp_path, monkeypatch):
    monkeypatch.setattr(_probe_cache, "probe_dir", lambda: tmp_path / "probes")
    driver = tmp_path / "libdriver.so"
    driver.write_bytes(b"v1")
    calls = []

    def probe():
        calls.append(1)
        return {"devices": [{"name": "gpu", "n": len(calls)}]}

    return driver, calls, probe


def test_the_second_ask_is_answered_from_the_cache(probes):
    driver, calls, probe = probes
    first = cached_probe("kind", [driver], ["facts"], probe)
    second = cached_probe("kind", [driver], ["facts"], probe)
    assert first == ({"devices": [{"name": "gpu", "n": 1}]}, False)
    assert second == (first[0], True) and len(calls) == 1


def test_a_changed_file_other_facts_or_refresh_probe_again(probes):
    driver, calls, probe = probes
    cached_probe("kind", [driver], ["facts"], probe)
    driver.write_bytes(b"version 2")  # a reinstalled driver: other size
    assert cached_probe("kind", [driver], ["facts"], probe)[1] is False
    assert cached_probe("kind", [driver], ["other facts"], probe)[1] is False
    assert cached_probe("kind", [driver], ["facts"], probe, refresh=True)[1] is False
    assert len(calls) == 4
    assert cached_probe("kind", [driver], ["facts"], probe) == (
        {"devices": [{"name": "gpu", "n": 4}]},
        True,
    )


def test_a_failing_probe_is_not_stored(probes):
    driver, _calls, _probe = probes

    def broken():
        raise RuntimeError("driver stack broken")

    with pytest.raises(RuntimeError):
        cached_probe("kind", [driver], [], broken)
    assert not (_probe_cache.probe_dir()).exists() or not os.listdir(_probe_cache.probe_dir())


def test_the_switch_turns_it_off(probes, monkeypatch):
    driver, calls, probe = probes
    monkeypatch.setenv(ENV_SWITCH, "0")
    cached_probe("kind", [driver], [], probe)
    assert cached_probe("kind", [driver], [], probe)[1] is False and len(calls) == 2


def test_a_damaged_entry_is_probed_again(probes):
    driver, calls, probe = probes
    cached_probe("kind", [driver], [], probe)
    (entry,) = _probe_cache.probe_dir().iterdir()
    entry.write_text("{not json")
    assert cached_probe("kind", [driver], [], probe)[1] is False and len(calls) == 2

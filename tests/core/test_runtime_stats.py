"""A runtime's counters and transfer trace, on every backend (``each_rt``): one key per counter
(one of them for synchronization), and each upload, download, device copy and wait counted and
traced once."""

from __future__ import annotations

import numpy as np

from tenferro_host.provider import STAT_KEYS


def test_stats_keys_and_exactly_one_sync_key(each_rt):
    stats = each_rt.stats()
    assert set(stats) == set(STAT_KEYS)
    assert [k for k in stats if "sync" in k] == ["synchronizations"]
    assert all(isinstance(v, int) for v in stats.values())


def test_stats_count_transfers_and_waits(each_rt):
    rt = each_rt
    t = rt.upload(np.ones((4, 4), np.float32))
    t.download()
    rt.canonicalize(t.T)
    with rt.session() as s:
        s.exec_session().synchronize()
    rt.synchronize()
    stats = rt.stats()
    assert stats["uploads"] == 1 and stats["downloads"] == 1
    assert stats["d2d_copies"] == 1 and stats["synchronizations"] == 2
    assert [(r.kind, r.nbytes, r.src, r.dst) for r in rt.transfer_trace()] == [
        ("upload", 64, "host", rt.name),
        ("download", 64, rt.name, "host"),
        ("d2d", 64, rt.name, rt.name),
    ]

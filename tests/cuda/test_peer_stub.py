"""Multi-GPU paths against a simulated driver topology (no GPU needed; runs in CI).

The real CudaRuntime, copies, peer grants and probe run on :class:`FakeDriver`, which models
several devices, directional peer access and per-pool access grants the way the measured
hardware behaves (an ungranted pool is inaccessible; a broken IOMMU can drop peer writes).
"""

from __future__ import annotations

import gc
import hashlib
import json
import threading
import weakref
from contextlib import redirect_stdout
from io import StringIO

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

import tenferro_host as tf
from tenferro_host import _cli as cli


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def only_one_to_zero(dst: int, src: int) -> bool:
    """Asymmetric topology: device 1 can reach device 0's memory, not the other way."""
    return (dst, src) == (1, 0)


def host_traffic(*runtimes) -> list:
    return [r for rt in runtimes for r in rt.transfer_trace() if r.kind in ("upload", "download")]


# -- device attributes --------------------------------------------------------------------------
def test_device_info_has_pci_bus_id_and_numa_node(install):
    install(2)
    host = tf.Host()
    rt = install.make(1, host)
    assert rt.device_info.pci_bus_id == "0000:19:00.0" and rt.device_info.host_numa_id == 1
    listed = host.backend_status("cuda").devices
    assert [(d["pci_bus_id"], d["host_numa_id"]) for d in listed] == [
        ("0000:18:00.0", 0),
        ("0000:19:00.0", 1),
    ]
    assert rt.capabilities()[tf.ExtensionCapability.PEER_COPY]


def test_peer_copy_capability_is_false_without_a_reachable_peer(install):
    install(2, peer=lambda dst, src: False)
    assert not install.make(0, tf.Host()).capabilities()[tf.ExtensionCapability.PEER_COPY]


# -- the directional matrix ---------------------------------------------------------------------
def test_can_access_peer_is_directional_and_asked_every_time(install):
    fake = install(2, peer=only_one_to_zero)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    assert tf.cuda.can_access_peer(1, 0) is True
    assert tf.cuda.can_access_peer(0, 1) is False
    with r0.session() as s0, r1.session() as s1:
        assert tf.cuda.can_access_peer(s1, s0) is True
        assert tf.cuda.can_access_peer(r0, tf.cuda.exec_session(s1)) is False
    assert fake.peer_queries == [(1, 0), (0, 1), (1, 0), (0, 1)]


def test_can_access_peer_wrong_inputs(install):
    install(2)
    host = tf.Host()
    r0, other0 = install.make(0, host), install.make(0, host)
    with pytest.raises(tf.ValidationError, match="not a peer pair"):
        tf.cuda.can_access_peer(r0, other0)
    with pytest.raises(tf.ValidationError, match=r"does not exist.*2 CUDA device"):
        tf.cuda.can_access_peer(5, 0)
    with pytest.raises(tf.ValidationError, match="device ordinal"):
        tf.cuda.can_access_peer("cuda:1", 0)


# -- the four paths -----------------------------------------------------------------------------
def test_same_runtime_is_a_typed_error_with_guidance(install):
    install(2)
    rt = install.make(0, tf.Host())
    t = rt.upload(np.ones(4, np.float32))
    with rt.session() as s:
        for copy in (tf.cuda.copy_from_same_device, tf.cuda.copy_from_peer):
            with pytest.raises(tf.ValidationError, match=r"same runtime.*canonicalize"):
                copy(s, s, t)


def test_same_uuid_two_runtimes_copies_and_is_refused_by_copy_from_peer(install):
    install(2)
    host = tf.Host()
    a, b = install.make(0, host), install.make(0, host)
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    src = a.upload(x)
    with a.session() as sa, b.session() as sb:
        with pytest.raises(tf.ValidationError, match=r"same GPU.*copy_from_same_device"):
            tf.cuda.copy_from_peer(sa, sb, src)
        before = len(host_traffic(a, b))
        out = tf.cuda.copy_from_same_device(sa, sb, src)
        assert len(host_traffic(a, b)) == before
    assert out.storage.domain == b.domain and out.backend is b
    assert digest(out.download()) == digest(x)
    assert [r.kind for r in b.transfer_trace()] == ["same_device", "download"]


def test_different_uuid_given_to_copy_from_same_device_names_copy_from_peer(install):
    install(2)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    with r0.session() as s0, r1.session() as s1:
        with pytest.raises(tf.ValidationError, match=r"different GPUs.*copy_from_peer"):
            tf.cuda.copy_from_same_device(s0, s1, r0.upload(np.ones(2, np.float32)))


def test_peer_copy_grants_pool_access_once_and_lands_in_the_destination_domain(install):
    from tenferro_host_cuda import _peer as peer

    fake = install(2)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    x = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    src = r0.upload(x)
    assert peer.pool_access(r0, 1) == "none" and peer.granted(r0) == frozenset()
    with r0.session() as s0, r1.session() as s1:
        before_calls, before_host = len(fake.calls), len(host_traffic(r0, r1))
        out = tf.cuda.copy_from_peer(s0, s1, src)
        again = tf.cuda.copy_from_peer(s0, tf.cuda.exec_session(s1), src)
        during = fake.calls[before_calls:]
        assert len(host_traffic(r0, r1)) == before_host
    assert not [c for c in during if c[0] in ("cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync")]
    assert [c[1] for c in during if c[0] == "cuMemPoolSetAccess"] == [(0, 1)]
    assert [c[1] for c in during if c[0] == "cuCtxEnablePeerAccess"] == [(1, 0)]
    assert peer.pool_access(r0, 1) == "readwrite" and peer.granted(r0) == frozenset({1})
    assert peer.pool_access(r1, 0) == "none"  # the other direction is not granted
    for t in (out, again):
        assert t.storage.domain == r1.domain and t.backend is r1
        assert digest(t.download()) == digest(x)
    assert r1.stats()["peer_copies"] == 2
    peer_records = [r for r in r1.transfer_trace() if r.kind == "peer"]
    assert [(r.src, r.dst, r.nbytes, r.path) for r in peer_records] == [
        ("cuda:0", "cuda:1", x.nbytes, "p2p")
    ] * 2


def test_new_source_runtime_needs_its_own_pool_grant(install):
    from tenferro_host_cuda import _peer as peer

    fake = install(2)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    with r0.session() as s0, r1.session() as s1:
        tf.cuda.copy_from_peer(s0, s1, r0.upload(np.ones(8, np.int32)))
    second = install.make(0, host)
    assert peer.pool_access(second, 1) == "none"
    with second.session() as s0, r1.session() as s1:
        out = tf.cuda.copy_from_peer(s0, s1, second.upload(np.full(8, 7, np.int32)))
    assert peer.pool_access(second, 1) == "readwrite"
    assert len([c for c in fake.calls if c[0] == "cuMemPoolSetAccess"]) == 2
    np.testing.assert_array_equal(out.download(), np.full(8, 7, np.int32))


def test_without_peer_access_peer_access_error_and_nothing_staged(install):
    from tenferro_host_cuda import _peer as peer

    fake = install(2, peer=only_one_to_zero)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    x = np.arange(16, dtype=np.int64)
    on1 = r1.upload(x)
    on0 = r0.upload(x)
    with r0.session() as s0, r1.session() as s1:
        before_calls, before_host = len(fake.calls), len(host_traffic(r0, r1))
        with pytest.raises(tf.PeerAccessError, match=r"cannot access memory.*no host-staged"):
            tf.cuda.copy_from_peer(s1, s0, on1)  # dst 0 reading src 1: not allowed
        assert not [
            c
            for c in fake.calls[before_calls:]
            if c[0] in ("cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync")
        ]
        assert len(host_traffic(r0, r1)) == before_host
        assert peer.pool_access(r1, 0) == "none" and peer.granted(r1) == frozenset()
        # The swapped direction is asked of the driver again, and it is allowed.
        queries = len(fake.peer_queries)
        out = tf.cuda.copy_from_peer(s0, s1, on0)
        assert fake.peer_queries[queries:] == [(1, 0)]
    np.testing.assert_array_equal(out.download(), x)


def test_grant_that_the_pool_does_not_report_is_a_peer_access_error(install, monkeypatch):
    from support.fake_cuda_driver import SUCCESS
    from tenferro_host_cuda import _peer as peer

    fake = install(2)
    monkeypatch.setattr(
        fake, "cuMemPoolSetAccess", lambda pool, descs, n: (SUCCESS,), raising=False
    )
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    with r0.session() as s0, r1.session() as s1:
        with pytest.raises(tf.PeerAccessError, match="reports 'none' access"):
            tf.cuda.copy_from_peer(s0, s1, r0.upload(np.ones(4, np.float32)))
    assert peer.granted(r0) == frozenset()


def test_driver_refusing_the_copy_is_a_peer_access_error(install, monkeypatch):
    from support.fake_cuda_driver import INVALID_VALUE

    fake = install(2)
    monkeypatch.setattr(fake, "cuMemcpyAsync", lambda *a: (INVALID_VALUE,), raising=False)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    with r0.session() as s0, r1.session() as s1:
        with pytest.raises(tf.PeerAccessError, match="CUDA_ERROR_INVALID_VALUE"):
            tf.cuda.copy_from_peer(s0, s1, r0.upload(np.ones(4, np.float32)))


def test_wrong_sessions_and_tensors(install):
    install(2)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    cpu = host.backend("cpu")
    t1 = r1.upload(np.ones(4, np.float32))
    with r0.session() as s0, r1.session() as s1, cpu.session() as c:
        with pytest.raises(tf.ForeignRuntimeError):
            tf.cuda.copy_from_peer(s0, s1, t1)  # t1 is not the source's
        with pytest.raises(tf.ValidationError, match="CUDA session"):
            tf.cuda.copy_from_peer(s0, c, t1)
        with pytest.raises(tf.ValidationError, match="CUDA session"):
            tf.cuda.copy_from_peer(r0, s1, t1)  # a runtime is not a session
    with pytest.raises(tf.SessionClosedError):
        tf.cuda.copy_from_peer(s1, s0, t1)
    with r0.session() as s0, r1.session() as s1:
        empty = tf.cuda.copy_from_peer(s1, s0, r1.zeros(tf.float32, (0, 3)))
    assert empty.shape == (0, 3) and empty.backend is r0


# -- ordering, lease, views ---------------------------------------------------------------------
def test_event_ordering_and_the_source_lease(install):
    fake = install(2)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    src_stream, dst_stream = fake.stream_of(r0), fake.stream_of(r1)
    src = r0.upload(np.arange(1 << 16, dtype=np.float32))
    src_ptr = src.storage.ptr
    storage_ref = weakref.ref(src.storage)
    with r0.session() as s0, r1.session() as s1:
        start = len(fake.calls)
        out = tf.cuda.copy_from_peer(s0, s1, src)
        del src
        gc.collect()
        assert storage_ref() is not None  # leased until the copy's event is seen complete
        r1.retirement.poll()
        gc.collect()
        assert storage_ref() is None
        r0.drain_deferred()
        r0.trim()  # freed blocks wait in the runtime's block cache; trim returns them to the pool
    seq = [
        c
        for c in fake.calls[start:]
        if c[0] in ("cuEventRecord", "cuStreamWaitEvent", "cuMemcpyAsync", "free")
    ]
    names = [c[0] for c in seq]
    ready, waited, copy, done, src_waits = (
        seq[names.index("cuMemcpyAsync") + k] for k in (-2, -1, 0, 1, 2)
    )
    assert ready[0] == "cuEventRecord" and ready[1][1] == src_stream
    assert waited == ("cuStreamWaitEvent", (dst_stream, ready[1][0]))
    assert copy[0] == "cuMemcpyAsync" and copy[1][1] == src_ptr and copy[1][3] == dst_stream
    assert done[0] == "cuEventRecord" and done[1][1] == dst_stream
    assert src_waits == ("cuStreamWaitEvent", (src_stream, done[1][0]))
    free = seq.index(("free", (src_ptr, src_stream)))
    assert free > seq.index(src_waits)  # the source's free is stream-ordered after the copy
    assert out.download()[-1] == (1 << 16) - 1


def test_compact_view_copies_as_it_is_and_others_are_canonicalized_on_the_source(
    install, monkeypatch
):
    install(2)
    host = tf.Host()
    r0, r1 = install.make(0, host), install.make(1, host)
    x = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
    t = r0.upload(x)
    seen = []
    original = r0.canonicalize

    def spy(view):
        seen.append(view.shape)
        return original(view)

    monkeypatch.setattr(r0, "canonicalize", spy)
    monkeypatch.setattr(
        type(r0),
        "_copy_to_compact",
        lambda self, a, b: pytest.fail("a compact view was canonicalized"),
    )
    with r0.session() as s0, r1.session() as s1:
        cols = tf.cuda.copy_from_peer(s0, s1, t[:, 1:3])  # column-major: compact with offset
        assert seen == []
        monkeypatch.setattr(type(r0), "_copy_to_compact", lambda self, a, b: None)
        tf.cuda.copy_from_peer(s0, s1, t.T)
    np.testing.assert_array_equal(cols.download(), x[:, 1:3])
    assert seen == [(5, 4)]


# -- concurrency ------------------------------------------------------------------------------
def test_two_devices_in_two_threads_restore_each_threads_context(install):
    fake = install(2)
    host = tf.Host()
    runtimes = [install.make(0, host), install.make(1, host)]
    results, errors = {}, []

    def work(i: int) -> None:
        try:
            fake.cuCtxSetCurrent(fake.CUcontext(7 + i))  # the thread's own current context
            rt = runtimes[i]
            x = np.full(1000, i + 1, np.int32)
            for _ in range(50):
                with rt.session():
                    results[i] = rt.download(rt.upload(x))
            results[f"ctx{i}"] = int(fake.cuCtxGetCurrent()[1])
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert results["ctx0"] == 7 and results["ctx1"] == 8
    np.testing.assert_array_equal(results[1], np.full(1000, 2, np.int32))


# -- the probe --------------------------------------------------------------------------------
def test_probe_verifies_each_ordered_pair(install):
    install(2, peer=only_one_to_zero)
    probes, summary = tf.cuda.probe_p2p(tf.Host(), nbytes=1 << 16, repeats=2)
    by_pair = {(p.dst, p.src): p for p in probes}
    assert set(by_pair) == {(0, 1), (1, 0)}
    assert by_pair[(1, 0)].status == "verified" and by_pair[(1, 0)].gbps > 0
    assert by_pair[(0, 1)].status == "unsupported" and by_pair[(0, 1)].gbps is None
    assert "no peer access from cuda:0 to cuda:1" in by_pair[(0, 1)].detail
    assert summary == "2 CUDA devices: 1 of 2 ordered pairs verified"


def test_probe_reports_failed_when_writes_are_dropped(install):
    install(2, drop_peer_writes=True)
    probes, _ = tf.cuda.probe_p2p(tf.Host(), nbytes=1 << 16, repeats=2)
    assert [p.status for p in probes] == ["failed", "failed"]
    assert all("checksum mismatch" in p.detail and p.gbps is None for p in probes)


def test_probe_reports_failed_when_the_copy_raises(install):
    from tenferro_host_cuda import _p2p_probe as p2p_probe

    install(2)

    def broken(src_session, dst_session, tensor):
        raise tf.PeerAccessError("simulated")

    probe = p2p_probe.probe_pair(tf.Host(), 1, 0, nbytes=64, copy=broken)
    assert probe.status == "failed" and "PeerAccessError: simulated" in probe.detail


def test_probe_of_one_device_twice_is_not_a_peer_pair(install):
    from tenferro_host_cuda import _p2p_probe as p2p_probe

    install(1)
    with pytest.raises(tf.ValidationError, match="not a peer pair"):
        p2p_probe.probe_pair(tf.Host(), 0, 0)
    with pytest.raises(tf.ValidationError, match="multiple of 4"):
        p2p_probe.probe_pair(tf.Host(), 0, 0, nbytes=6)
    assert tf.cuda.probe_p2p(tf.Host()) == (
        [],
        "1 CUDA device(s): no ordered device pairs to probe (peer copies need two GPUs)",
    )


def test_caps_probe_p2p_json_adds_a_p2p_list(install, monkeypatch):
    from tenferro_host_cuda import _p2p_probe as p2p_probe

    install(2, peer=only_one_to_zero)
    monkeypatch.setattr(p2p_probe, "DEFAULT_NBYTES", 1 << 12)
    out = StringIO()
    with redirect_stdout(out):
        assert cli.main(["caps", "--probe-p2p", "--json"]) == 0
    report = json.loads(out.getvalue())
    assert report["schema_version"] == 1
    assert {"backends", "plugins", "ops", "p2p"} <= set(report)
    assert [(p["dst"], p["src"], p["status"]) for p in report["p2p"]] == [
        (0, 1, "unsupported"),
        (1, 0, "verified"),
    ]
    assert report["p2p"][1]["link"]["performance_rank"] == 0
    out = StringIO()
    with redirect_stdout(out):
        assert cli.main(["caps", "--json"]) == 0
    assert "p2p" not in json.loads(out.getvalue())


def test_caps_probe_p2p_with_one_gpu_says_there_is_no_pair(install, capsys):
    install(1)
    assert cli.main(["caps", "--probe-p2p", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["p2p"] == []
    assert cli.main(["caps", "--probe-p2p"]) == 0
    assert "1 CUDA device(s): no ordered device pairs to probe" in capsys.readouterr().out


def test_caps_probe_p2p_without_cuda_says_why(install, capsys):
    install(0)
    assert cli.main(["caps", "--probe-p2p"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no device pairs to probe: CUDA is unavailable (the CUDA driver sees no device)" in out

"""Multi-GPU paths on real devices: one GPU (two runtimes) and, marked multi_gpu, two GPUs.

The no-access path and the swapped re-query are proven against a simulated topology in
test_peer_stub.py; here the driver is real, so the paths are proven by pool state, transfer
traces and data.
"""

from __future__ import annotations

import gc
import hashlib
import re
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest
from support.cuda_support import SPIN_SRC, cuda_runtime, current_context, driver

import tenferro_host as tf
from tenferro_host.cuda import raw

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

LARGE = 64 << 20  # float32 elements: 256 MiB
SPIN_NS = 1_000_000_000  # 1 s: far longer than queuing the copy, the free and the reuse


@pytest.fixture
def rt():
    return cuda_runtime()


def device_count() -> int:
    err, n = driver().cuDeviceGetCount()
    assert int(err) == 0
    return int(n)


@pytest.fixture
def two(rt):
    """Fresh runtimes (fresh pools) on devices 0 and 1; skip when there are fewer than two GPUs."""
    n = device_count()
    if n < 2:
        pytest.skip(f"needs two GPUs of one host, this one has {n}")
    return rt.host.new_backend("cuda:0"), rt.host.new_backend("cuda:1")


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def host_traffic(*runtimes) -> list:
    return [r for x in runtimes for r in x.transfer_trace() if r.kind in ("upload", "download")]


def spin(session) -> None:
    """Keep ``session``'s stream busy for SPIN_NS, so work queued after it is still pending."""
    with tf.cuda.exec_session(session).raw("tests.spin") as rs:
        flag = rs.alloc_output(tf.int32, (1,))
        rs.launch(
            rs.compile_nvrtc(SPIN_SRC).function("spin"),
            raw.LaunchConfig(1, 1),
            [rs.tensor_mut(flag), raw.u64(SPIN_NS)],
        )


def copy_survives_source_free(src_rt, dst_rt, copy) -> None:
    """Free a large source right after its copy is queued behind a busy destination stream,
    reuse the memory on the source at once; the copy must still read the original bytes."""
    x = np.arange(LARGE, dtype=np.float32)
    src = src_rt.upload(x)
    src_rt.synchronize()
    storage = weakref.ref(src.storage)
    with src_rt.session() as s_src, dst_rt.session() as s_dst:
        spin(s_dst)
        out = copy(s_src, s_dst, src)
        del src
        gc.collect()
        assert storage() is not None  # leased: the copy has not run yet
        junk = src_rt.zeros(tf.float32, (LARGE,))  # drains the free, may reuse the block
    assert digest(out.download()) == digest(x)
    dst_rt.retirement.poll()
    gc.collect()
    assert storage() is None
    assert junk.download()[-1] == 0


# -- one GPU --------------------------------------------------------------------------------------
def test_device_info_has_pci_bus_id_and_numa_node(rt):
    info = rt.device_info
    assert re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", info.pci_bus_id, re.I)
    assert info.host_numa_id is None or info.host_numa_id >= 0
    listed = rt.host.backend_status("cuda").devices[0]
    assert listed["pci_bus_id"] == info.pci_bus_id and "host_numa_id" in listed


def test_one_gpu_is_not_a_peer_pair(rt):
    from tenferro_host_cuda import _p2p_probe as p2p_probe

    other = rt.host.new_backend("cuda")
    with pytest.raises(tf.ValidationError, match="not a peer pair"):
        tf.cuda.can_access_peer(other, rt)
    with pytest.raises(tf.ValidationError, match="not a peer pair"):
        p2p_probe.probe_pair(rt.host, rt.index, other.index)
    t = rt.upload(np.ones(4, np.float32))
    with rt.session() as a, other.session() as b:
        with pytest.raises(tf.ValidationError, match=r"same GPU.*copy_from_same_device"):
            tf.cuda.copy_from_peer(a, b, t)
        with pytest.raises(tf.ValidationError, match="same runtime"):
            tf.cuda.copy_from_peer(a, a, t)
    if device_count() == 1:
        probes, summary = tf.cuda.probe_p2p(rt.host)
        assert probes == [] and "no ordered device pairs" in summary
        assert not rt.capabilities()[tf.ExtensionCapability.PEER_COPY]


def test_same_device_copy_has_no_host_traffic_and_lands_in_the_destination(rt):
    other = rt.host.new_backend("cuda")
    x = np.random.default_rng(3).standard_normal((257, 129)).astype(np.float32)
    src = rt.upload(x)
    before = len(host_traffic(rt, other))
    with rt.session() as a, other.session() as b:
        out = tf.cuda.copy_from_same_device(a, b, src)
        view = tf.cuda.copy_from_same_device(a, b, src.T)  # canonicalized on the source first
    assert len(host_traffic(rt, other)) == before
    assert out.storage.domain == other.domain and view.storage.domain == other.domain
    assert digest(out.download()) == digest(x)
    assert digest(view.download()) == digest(np.asfortranarray(x.T))


def test_same_device_copy_survives_a_source_freed_mid_copy(rt):
    copy_survives_source_free(rt, rt.host.new_backend("cuda"), tf.cuda.copy_from_same_device)


def run_in_threads(runtimes, contexts) -> None:
    """Each runtime in its own thread with ``contexts[i]`` current; work checked, context
    restored."""
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            d = driver()
            if contexts[i] is not None:
                assert int(d.cuCtxSetCurrent(contexts[i])[0]) == 0
            before = current_context()
            x = np.arange(300 * 301, dtype=np.float32).reshape(300, 301) * (i + 1)
            rt = runtimes[i]
            for _ in range(20):
                with rt.session():
                    t = rt.upload(x)
                    np.testing.assert_array_equal(rt.canonicalize(t.T).download(), x.T)
            assert current_context() == before
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(runtimes))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_two_runtimes_of_one_gpu_in_two_threads(rt):
    run_in_threads([rt, rt.host.new_backend("cuda")], [None, None])


def test_doc_blocks_run(rt):
    doc = Path(__file__).resolve().parents[2] / "docs" / "multi-gpu.md"
    blocks = re.findall(r"^```python\n(.*?)^```$", doc.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 2 and "copy_from_peer" in blocks[1]
    namespace: dict[str, object] = {"__name__": "multi_gpu_doc"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{doc.name}[python block {i}]", "exec"), namespace)  # noqa: S102


# -- two GPUs -----------------------------------------------------------------------------------
@pytest.mark.multi_gpu
def test_peer_copy_grants_access_and_moves_no_host_bytes(two):
    from tenferro_host_cuda import _peer as peer

    r0, r1 = two
    d = driver()
    for src, dst in ((r0, r1), (r1, r0)):
        _err, direct = d.cuDeviceCanAccessPeer(d.CUdevice(dst.index), d.CUdevice(src.index))
        assert tf.cuda.can_access_peer(dst, src) is bool(direct)  # each direction asked
        if direct:
            assert dst.capabilities()[tf.ExtensionCapability.PEER_COPY]
        x = np.random.default_rng(src.index).standard_normal((1000, 513)).astype(np.float32)
        t = src.upload(x)
        assert peer.pool_access(src, dst) == "none" and peer.granted(src) == frozenset()
        with src.session() as s_src, dst.session() as s_dst:
            if not direct:
                with pytest.raises(tf.PeerAccessError):
                    tf.cuda.copy_from_peer(s_src, s_dst, t)
                continue
            before = len(host_traffic(r0, r1))
            out = tf.cuda.copy_from_peer(s_src, s_dst, t)
            view = tf.cuda.copy_from_peer(s_src, s_dst, t.T)
            assert len(host_traffic(r0, r1)) == before
        assert peer.pool_access(src, dst) == "readwrite" and dst.index in peer.granted(src)
        assert out.storage.domain == dst.domain and out.backend is dst
        assert digest(out.download()) == digest(x)
        assert digest(view.download()) == digest(np.asfortranarray(x.T))
        assert [r.path for r in dst.transfer_trace() if r.kind == "peer"][-2:] == ["p2p"] * 2


@pytest.mark.multi_gpu
def test_peer_copy_survives_a_source_freed_mid_copy(two):
    r0, r1 = two
    if not tf.cuda.can_access_peer(r1, r0):
        pytest.skip("cuda:1 has no peer access to cuda:0 here (PeerAccessError path)")
    copy_survives_source_free(r0, r1, tf.cuda.copy_from_peer)


@pytest.mark.multi_gpu
def test_two_gpus_in_two_threads_restore_each_threads_context(two):
    r0, r1 = two
    # Each thread starts with the *other* device's primary context current.
    run_in_threads([r0, r1], [r1.primary.handle, r0.primary.handle])


@pytest.mark.multi_gpu
def test_probe_verifies_pairs_with_access(two):
    r0, _ = two
    probes, summary = tf.cuda.probe_p2p(r0.host, nbytes=16 << 20, repeats=3)
    n = device_count()
    assert len(probes) == n * (n - 1)
    for p in probes:
        expected = "verified" if tf.cuda.can_access_peer(p.dst, p.src) else "unsupported"
        assert p.status == expected, p
        assert (p.gbps is not None and p.gbps > 0) == (expected == "verified")
    assert summary.startswith(f"{n} CUDA devices")

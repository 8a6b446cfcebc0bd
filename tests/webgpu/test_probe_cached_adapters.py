"""The adapter list ``caps`` shows comes from the probe cache once probed (the same list, each
device saying ``"probe": "cache"``), live again with ``TENFERRO_PROBE_CACHE=0``; the capabilities
of a cached backend need no runtime."""

from __future__ import annotations

from tenferro_host_webgpu.adapters import adapters

import tenferro_host as tf


def _without_probe(found):
    return [{k: v for k, v in a.describe().items() if k != "probe"} for a in found]


def test_adapters_come_from_the_probe_cache_once_probed(webgpu_host, monkeypatch):
    monkeypatch.setenv("TENFERRO_PROBE_CACHE", "0")
    live = adapters()
    assert live and not any(a.from_cache for a in live)
    monkeypatch.delenv("TENFERRO_PROBE_CACHE")
    adapters()  # stored (if no earlier probe of this session stored it)
    cached = adapters()
    assert all(a.from_cache and a.describe()["probe"] == "cache" for a in cached)
    assert _without_probe(cached) == _without_probe(live)
    assert [a.limits for a in cached] == [a.limits for a in live]


def test_cached_capabilities_create_no_runtime(webgpu_host):
    adapters()  # stored, so the hosts below see cached devices
    host = tf.Host()
    status = host.backend_status("webgpu")
    assert all(d["probe"] == "cache" for d in status.devices)
    host.backend_capabilities(status)  # stored by an earlier test's runtime, or now
    fresh = tf.Host()
    caps = fresh.backend_capabilities(fresh.backend_status("webgpu"))
    assert caps[tf.ExtensionCapability.JIT_KERNEL] is True
    assert fresh._backends == {}  # answered without creating a runtime

"""The ROCm provider: listed, unavailable with a typed reason, never claiming a capability."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tenferro_host_rocm

import tenferro_host as tf


def test_loaded_through_its_entry_point(host):
    record = next(r for r in host.plugins.records if r.name == "rocm")
    assert (record.status, record.dist) == ("loaded", "tenferro-host")
    assert host.registry.providers["rocm"][0] == "tenferro-host"
    assert tenferro_host_rocm.TENFERRO_HOST_API == (1, 0)


def test_status_is_unavailable_with_the_reason(host):
    status = host.backend_status("rocm")
    assert not status.available and not status.devices
    assert status.reason == tenferro_host_rocm.REASON
    assert "hardware evidence" in status.reason
    assert isinstance(status.error, tf.UnsupportedError)
    assert "rocm" in [s.kind for s in host.backend_statuses()]
    assert host.default_backend() != "rocm:0"


@pytest.mark.parametrize("name", ["rocm", "rocm:0", "rocm:1"])
def test_backend_raises_unsupported(host, name):
    with pytest.raises(tf.UnsupportedError, match="no validated HIP substrate") as info:
        host.backend(name)
    assert (info.value.backend, info.value.feature) == ("rocm", "backend")
    assert info.value.reason == tenferro_host_rocm.REASON
    with pytest.raises(tf.UnsupportedError):
        host.new_backend(name)


def test_no_session_and_no_op_run(host):
    a = host.backend("cpu").upload(np.ones(2, np.float32))
    with pytest.raises(tf.UnsupportedError, match="ROCm support ships only with hardware"):
        host.run("ext_add_kernel.add", a, a, backend="rocm")


def test_create_raises_even_when_called_directly(host):
    provider = host.registry.provider("rocm")
    with pytest.raises(tf.UnsupportedError):
        provider.create(host, 0)


def test_capability_hook_answers_all_false_for_rocm_only(host):
    hook = host.plugins.pm.hook.tenferro_host_capabilities
    answer = hook(backend=SimpleNamespace(kind="rocm"))
    assert answer == dict.fromkeys(tf.ExtensionCapability, False)
    assert tenferro_host_rocm.tenferro_host_capabilities(SimpleNamespace(kind="cpu")) is None
    assert host.backend("cpu").capabilities()[tf.ExtensionCapability.JIT_KERNEL]

"""The four identity layers: value semantics within a layer, never equal across layers."""

from __future__ import annotations

import itertools

import pytest

import tenferro_host as tf
from tenferro_host import AllocationDomainId, CudaDeviceId, CudaDeviceUuid, RuntimeIdentity


def test_device_id_has_value_semantics():
    assert CudaDeviceId(1) == CudaDeviceId(1)
    assert CudaDeviceId(1) != CudaDeviceId(2)
    assert len({CudaDeviceId(0), CudaDeviceId(0)}) == 1
    assert str(CudaDeviceId(3)) == "cuda:3"


def test_uuid_formats_like_nvidia_smi_and_compares_by_bytes():
    raw = bytes(range(16))
    uuid = CudaDeviceUuid(raw)
    assert str(uuid) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert uuid == CudaDeviceUuid(bytes(range(16)))
    assert uuid != CudaDeviceUuid(bytes(16))


@pytest.mark.parametrize("raw", [b"", bytes(15), bytes(17)], ids=["0", "15", "17"])
def test_uuid_needs_16_bytes(raw):
    with pytest.raises(tf.ValidationError, match="16 bytes") as info:
        CudaDeviceUuid(raw)
    assert info.value.argument == "raw"


def test_runtime_identity_and_domain_are_unique_per_new():
    assert RuntimeIdentity.new() != RuntimeIdentity.new()
    assert AllocationDomainId.new() != AllocationDomainId.new()


def test_layers_never_compare_equal_even_with_equal_values():
    values = [CudaDeviceId(7), RuntimeIdentity(7), AllocationDomainId(7)]
    for a, b in itertools.combinations(values, 2):
        assert a != b and b != a
    assert len(set(values)) == 3


def test_two_runtimes_on_one_device_differ_in_identity_and_domain():
    host = tf.Host()
    a, b = host.backend("cpu"), host.new_backend("cpu")
    assert a is not b
    assert a.identity != b.identity
    assert a.domain != b.domain
    assert a.same_device(b)
    assert (a.name, b.name) == ("cpu:0", "cpu:0#2")  # distinct in every message
    assert a.upload([1.0]).storage.domain == a.domain
    assert b.upload([1.0]).storage.domain == b.domain

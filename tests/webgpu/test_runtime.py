"""The WebGPU runtime: adapters, selection, storage, dtype rule, limits (its transfers and stats
are tested on every backend: tests/core/test_transfers.py, tests/core/test_runtime_stats.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.subprocesses import Subprocess
from tenferro_host_webgpu import ADAPTER_ENV, adapters

import tenferro_host as tf
from tenferro_host.errors import BackendError, UnsupportedError
from tenferro_host.provider import STAT_KEYS

# -- adapters and selection ------------------------------------------------------------------


def test_probe_lists_every_adapter_with_type_api_and_software_flag(webgpu_host: Any) -> None:
    status = webgpu_host.backend_status("webgpu")
    found = adapters()
    assert [d["index"] for d in status.devices] == list(range(len(found)))
    for dev, info in zip(status.devices, found, strict=True):
        assert dev["name"] == info.name and dev["type"] == info.adapter_type
        assert dev["api"] == info.backend and dev["software"] == info.software
        if info.adapter_type == "CPU":
            assert info.software
    assert status.software == found[0].software
    hardware = [a for a in found if not a.software]
    assert found[: len(hardware)] == hardware, "hardware adapters come first"
    if status.software:
        assert webgpu_host.default_backend() != "webgpu:0"


def test_importing_the_plugin_does_not_import_wgpu(subproc: Subprocess) -> None:
    code = (
        "import sys, json, tenferro_host_webgpu, tenferro_host.webgpu\n"
        "print(json.dumps('wgpu' in sys.modules))"
    )
    assert subproc.json(code) is False


def test_env_selects_an_adapter_by_index_or_name(monkeypatch: pytest.MonkeyPatch) -> None:
    found = adapters()
    last = len(found) - 1
    monkeypatch.setenv(ADAPTER_ENV, str(last))
    chosen = adapters()
    assert (chosen[0].name, chosen[0].backend) == (found[last].name, found[last].backend)
    monkeypatch.setenv(ADAPTER_ENV, found[last].backend.upper())
    assert adapters()[0].backend == found[last].backend
    try:
        assert tf.Host().backend("webgpu").device_info.api == found[last].backend
    except BackendError as exc:  # e.g. NVIDIA's OpenGL adapter: no compute device
        assert "refused a device" in str(exc) and ADAPTER_ENV in str(exc)


def without_shader_f16(host: Any) -> Any:
    """A runtime on an adapter lacking shader-f16, or skip where none makes a device."""
    for a in adapters():
        if "shader-f16" not in a.features:
            try:
                return host.backend(f"webgpu:{a.index}")
            except BackendError:
                continue  # listed but refuses a compute device (NVIDIA's OpenGL adapter)
    pytest.skip("no adapter without shader-f16 makes a compute device here")


@pytest.mark.parametrize("value", ["no-such-adapter-name", "99"])
def test_env_naming_no_adapter_makes_webgpu_unavailable_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ADAPTER_ENV, value)
    host = tf.Host()
    status = host.backend_status("webgpu")
    assert not status.available and ADAPTER_ENV in (status.reason or "")
    with pytest.raises(UnsupportedError, match=ADAPTER_ENV):
        host.backend("webgpu")


def test_each_runtime_has_its_own_domain_on_the_same_device(webgpu_host: Any, rt: Any) -> None:
    other = webgpu_host.new_backend("webgpu")
    assert other.domain != rt.domain and other.identity != rt.identity
    assert other.same_device(rt) and other.device == rt.device
    assert webgpu_host.backend("webgpu") is rt


# -- storage and transfers ---------------------------------------------------------------------


def test_storage_is_a_padded_storage_buffer_and_bool_is_u32(rt: Any) -> None:
    t = rt.upload(np.array([True, False, True]))
    assert t.storage.buffer.size == 12 and t.storage.element_size == 4
    h = rt.empty("int32", (0, 3))
    assert h.storage.nbytes == 0 and not hasattr(h.storage, "buffer")
    if rt.device_info.shader_f16:
        assert rt.empty("float16", (3,)).storage.buffer.size == 8


# -- the portability rule and limits ---------------------------------------------------------------


def test_the_stored_dtypes_are_the_portability_rules(rt: Any) -> None:
    """What every transfer test (tests/core/test_transfers.py) draws from on WebGPU."""
    f16 = {"float16"} if rt.device_info.shader_f16 else set()
    assert rt.supported_dtypes == {"float32", "int32", "uint32", "bool"} | f16


@pytest.mark.parametrize(
    ("dtype", "feature"),
    [("float64", "shader-f64"), ("int64", "shader-int64"), ("complex64", "complex")],
)
def test_dtypes_outside_the_rule_raise_naming_the_feature(
    rt: Any, dtype: str, feature: str
) -> None:
    with pytest.raises(UnsupportedError) as info:
        rt.upload(np.zeros(3, dtype))
    assert info.value.feature == feature and feature in str(info.value)
    with pytest.raises(UnsupportedError):
        rt.empty(dtype, (2,))


def test_float16_without_shader_f16_raises_naming_the_feature(webgpu_host: Any) -> None:
    rt = without_shader_f16(webgpu_host)
    with pytest.raises(UnsupportedError) as info:
        rt.upload(np.zeros(3, np.float16))
    assert info.value.feature == "shader-f16" and "shader-f16" in str(info.value)


@pytest.mark.parametrize("limit", ["max_storage_buffer_binding_size", "max_buffer_size"])
def test_a_tensor_over_a_limit_is_out_of_memory_naming_it(rt: Any, limit: str) -> None:
    nbytes = getattr(rt.device_info, limit) + 4
    info = rt.device_info
    if limit == "max_storage_buffer_binding_size" and nbytes > info.max_buffer_size:
        pytest.skip("the binding limit is not below the buffer limit on this adapter")
    with pytest.raises(tf.OutOfMemoryError) as err:
        rt.empty("uint32", (nbytes // 4,))
    assert err.value.limit == limit and limit in str(err.value)
    assert err.value.nbytes == nbytes // 4 * 4 and set(err.value.pool_stats) == set(STAT_KEYS)


def test_bool_tensor_over_the_limit_counts_its_device_bytes(rt: Any) -> None:
    elements = rt.device_info.max_storage_buffer_binding_size // 4 + 1  # 4 device bytes each
    with pytest.raises(tf.OutOfMemoryError) as err:
        rt.empty("bool", (elements,))
    assert err.value.nbytes == elements * 4 and err.value.limit is not None


@pytest.mark.parametrize(
    "refusal", ["GPUOutOfMemoryError", "GPUValidationError", "GPUInternalError"]
)
def test_a_buffer_the_driver_refuses_is_out_of_memory_and_the_runtime_goes_on(
    fresh_rt: Any, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    kept = fresh_rt.upload(np.arange(10, dtype=np.float32))
    error = getattr(fresh_rt._wgpu, refusal)

    def refuse(**_: Any) -> None:
        raise error("Out of memory\n  In wgpuDeviceCreateBuffer")

    monkeypatch.setattr(fresh_rt._device, "create_buffer", refuse)
    with pytest.raises(tf.OutOfMemoryError) as err:
        fresh_rt.empty("float32", (1000,))
    assert err.value.nbytes == 4000 and err.value.limit is None
    assert refusal in str(err.value) and isinstance(err.value.__cause__, error)
    monkeypatch.undo()
    np.testing.assert_array_equal(kept.download(), np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(fresh_rt.zeros("float32", (3,)).download(), np.zeros(3))

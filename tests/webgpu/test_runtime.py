"""The WebGPU runtime: adapters, selection, storage, transfers, dtype rule, limits (its stats:
tests/core/test_runtime_stats.py, on every backend)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.subprocesses import Subprocess
from tenferro_host_webgpu import ADAPTER_ENV, adapters

import tenferro_host as tf
from tenferro_host.errors import BackendError, UnsupportedError
from tenferro_host.provider import STAT_KEYS

SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
shapes = st.lists(st.integers(0, 9), min_size=0, max_size=3).map(tuple)


def stored(rt: Any) -> list[str]:
    names = ["float32", "int32", "uint32", "bool"]
    return names + (["float16"] if rt.device_info.shader_f16 else [])


def sample(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 1000, shape).astype(dtype)


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


@SETTINGS
@given(shape=shapes, which=st.integers(0, 4), seed=st.integers(0, 2**16))
def test_upload_download_round_trip(rt: Any, shape: tuple[int, ...], which: int, seed: int) -> None:
    dtype = stored(rt)[which % len(stored(rt))]
    host = sample(np.random.default_rng(seed), dtype, shape)
    t = rt.upload(host)
    assert t.dtype.name == dtype and t.shape == shape and t.is_compact()
    assert t.storage.domain == rt.domain
    back = t.download()
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back, host)


def test_storage_is_a_padded_storage_buffer_and_bool_is_u32(rt: Any) -> None:
    t = rt.upload(np.array([True, False, True]))
    assert t.storage.buffer.size == 12 and t.storage.element_size == 4
    h = rt.empty("int32", (0, 3))
    assert h.storage.nbytes == 0 and not hasattr(h.storage, "buffer")
    if rt.device_info.shader_f16:
        assert rt.empty("float16", (3,)).storage.buffer.size == 8


@SETTINGS
@given(shape=shapes, which=st.integers(0, 4))
def test_zeros(rt: Any, shape: tuple[int, ...], which: int) -> None:
    dtype = stored(rt)[which % len(stored(rt))]
    rt.upload(np.ones(max(1, int(np.prod(shape))), dtype))  # dirty memory around
    np.testing.assert_array_equal(rt.zeros(dtype, shape).download(), np.zeros(shape, dtype))


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3).map(tuple),
    steps=st.lists(st.sampled_from([1, 2, -1, -2]), min_size=3, max_size=3),
    perm_seed=st.integers(0, 5),
    which=st.integers(0, 4),
)
def test_canonicalize_views_on_the_device(
    rt: Any, shape: tuple[int, ...], steps: list[int], perm_seed: int, which: int
) -> None:
    dtype = stored(rt)[which % len(stored(rt))]
    host = sample(np.random.default_rng(perm_seed), dtype, shape)
    t = rt.upload(host)
    key = tuple(slice(None, None, s) for s in steps[: len(shape)])
    perm = tuple(np.random.default_rng(perm_seed).permutation(len(shape)))
    view = t[key].permute(*perm)
    expected = host[key].transpose(perm)
    before = rt.stats()
    out = rt.canonicalize(view)
    after = rt.stats()
    assert out.is_compact() and out.shape == expected.shape
    assert (after["uploads"], after["downloads"]) == (before["uploads"], before["downloads"])
    assert after["d2d_copies"] == before["d2d_copies"] + 1
    assert rt.transfer_trace()[-1].kind == "d2d"
    np.testing.assert_array_equal(out.download(), expected)


# -- the portability rule and limits ---------------------------------------------------------------


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

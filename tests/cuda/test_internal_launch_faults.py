"""The host's own launch (canonicalize's gather, ``CudaRuntime.launch_internal``) follows the
fault rules of every raw launch, without a GPU (the driver and cuda.core's launch are stand-ins):
a sticky fault poisons the device's primary context and the error names the kernel and op; a
poisoned context launches nothing more; debug mode waits after the launch and attributes the
fault to the gather."""

from __future__ import annotations

import pytest
from support.driver_stand_in import recording_driver, stand_in_module, stand_in_runtime
from tenferro_host_cuda import _driver as driver
from tenferro_host_cuda import _launch, raw
from tenferro_host_cuda._gather import GATHER_CODES

import tenferro_host as tf

ILLEGAL_ADDRESS = 700
NAMES = {ILLEGAL_ADDRESS: b"CUDA_ERROR_ILLEGAL_ADDRESS", 0: b"CUDA_SUCCESS"}
SIZES = {"Q": 8, "q": 8, "i": 4}


@pytest.fixture
def gather(monkeypatch):
    """A stand-in runtime with its own device UUID (its poisoning is undone afterwards), the
    gather function and the arguments of a canonicalize launch."""
    host = tf.Host()
    with recording_driver() as fake:
        fake.sync_result = 0
        fake.cuStreamSynchronize = lambda stream: (fake.sync_result,)
        fake.cuGetErrorName = lambda err: (0, NAMES.get(int(err), b"CUDA_ERROR_UNKNOWN"))
        fake.cuGetErrorString = lambda err: (0, b"an illegal memory access was encountered")
        rt = stand_in_runtime(host)
        rt.uuid_bytes = b"\x7f" * 16
        module = stand_in_module(rt, tuple(SIZES[c] for c in GATHER_CODES))
        fn = module.function("gather_4")
        values = tuple(range(len(GATHER_CODES)))
        yield rt, fake, fn, raw.LaunchConfig.flat(1024, 256), values
    driver.POISONED.pop(rt.uuid_bytes, None)


def test_a_sticky_fault_in_the_gather_poisons_the_context(gather, monkeypatch):
    rt, _fake, fn, config, values = gather

    def refuse(*call):
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access")

    monkeypatch.setattr(_launch, "launch_fn", refuse)
    with pytest.raises(tf.ContextPoisonedError) as info:
        rt.launch_internal(fn, config, values)
    assert info.value.op == "canonicalize" and "gather_4" in str(info.value)
    assert "gather_4" in driver.poisoned_devices()[rt.uuid_bytes]
    launched = []
    monkeypatch.setattr(_launch, "launch_fn", lambda *call: launched.append(call))
    with pytest.raises(tf.ContextPoisonedError):
        rt.launch_internal(fn, config, values)  # refused before anything is enqueued
    assert launched == []


def test_a_refused_gather_is_a_launch_error_naming_it(gather, monkeypatch):
    rt, _fake, fn, config, values = gather

    def refuse(*call):
        raise RuntimeError("CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(_launch, "launch_fn", refuse)
    with pytest.raises(tf.LaunchError, match=r"gather_4.*op 'canonicalize'") as info:
        rt.launch_internal(fn, config, values)
    assert not isinstance(info.value, tf.ContextPoisonedError)
    assert rt.uuid_bytes not in driver.poisoned_devices()


def test_debug_mode_waits_after_the_gather_and_attributes_its_fault(gather, monkeypatch):
    rt, fake, fn, config, values = gather
    launched = []
    monkeypatch.setattr(_launch, "launch_fn", lambda *call: launched.append(call))
    rt.debug_sync = True
    rt.launch_internal(fn, config, values)
    assert len(launched) == 1 and rt.stats()["debug_waits"] == 1
    fake.sync_result = ILLEGAL_ADDRESS
    with pytest.raises(tf.LaunchError, match=r"gather_4.*CUDA_ERROR_ILLEGAL_ADDRESS"):
        rt.launch_internal(fn, config, values)
    assert "gather_4" in driver.poisoned_devices()[rt.uuid_bytes]

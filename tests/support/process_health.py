"""Checks that the test process is intact: interpreter objects, CUDA contexts.

``tests/conftest.py`` runs them after every test module; a C call writing into a Python
object, or a sticky CUDA fault, shows up there instead of in some unrelated later test.
"""

from __future__ import annotations

import io
import sys


def interpreter_problems() -> list[str]:
    """Damage a C call writing into a Python object would leave (b" " became NUL once)."""
    problems = [f"one-byte object {c} corrupted" for c in range(128) if chr(c).encode()[0] != c]
    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    print("a", "b\tc", file=text)  # the separator is written, and encoded, on its own
    if list(raw.getvalue()) != [97, 32, 98, 9, 99, 10]:
        problems.append(f"print wrote {raw.getvalue()!r} for 'a b\\tc'")
    return problems


def cuda_problems() -> list[str]:
    """Poisoned devices, and active primary contexts that no longer synchronize."""
    driver = sys.modules.get("tenferro_host_cuda._driver")
    if driver is None or not driver.initialised():
        return []
    poisoned = driver.poisoned_devices()
    problems = [f"CUDA device {uuid.hex()} poisoned: {why}" for uuid, why in poisoned.items()]
    d = driver.drv()
    _, count = d.cuDeviceGetCount()
    for ordinal in range(int(count)):
        _, dev = d.cuDeviceGet(ordinal)
        _, _, active = d.cuDevicePrimaryCtxGetState(dev)
        if not active:
            continue
        _, ctx = d.cuDevicePrimaryCtxRetain(dev)
        try:
            d.cuCtxPushCurrent(ctx)
            (err,) = d.cuCtxSynchronize()
            d.cuCtxPopCurrent()
            if int(err) != 0:
                problems.append(f"cuCtxSynchronize on device {ordinal}: {driver.error_name(err)}")
        finally:
            d.cuDevicePrimaryCtxRelease(dev)
    return problems

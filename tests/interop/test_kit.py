"""The kit's framework cases: the CLI flag, samples, and the skip when a framework is missing."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host._cli import main
from tenferro_host.interop._bridge import OutputAllocator
from tenferro_host.testing import frameworks


def test_check_frameworks_runs_the_bridge_cases(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    code = main(["check", "ext_add_kernel.add", "--frameworks", "--backends", "cpu", "--json"])
    report = json.loads(capsys.readouterr().out)
    checks = {(c["check"], c["status"]) for c in report["cases"] if c["backend"] == "cpu"}
    assert code == 0
    assert ("torch-opcheck", "passed") in checks and ("jax", "passed") in checks


def test_a_missing_framework_skips_naming_the_extra(
    bridge_host: tf.Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frameworks.importlib.util, "find_spec", lambda name: None)
    outcomes = [c.run() for c in frameworks.framework_cases(bridge_host, "ext_add_kernel.add")]
    cpu = [o for o in outcomes if o.case.backend == "cpu"]
    assert [o.status for o in cpu] == ["skipped", "skipped"]
    assert "tenferro-host[torch]" in cpu[0].message and "tenferro-host[jax]" in cpu[1].message


def test_samples_follow_the_reference_and_say_when_none_fits(bridge_host: tf.Host) -> None:
    spec = bridge_host.registry.op("linalg.matmul").spec
    assert spec is not None
    for arrays, _ in frameworks.samples(spec, {}):
        assert arrays[0].shape[1] == arrays[1].shape[0]
    einsum = bridge_host.registry.op("linalg.einsum").spec
    assert einsum is not None
    drawn = frameworks.samples(einsum, {})  # with its sample_attributes, spec="ij,jk->ik"
    assert drawn and all(kw == {"spec": "ij,jk->ik"} for _, kw in drawn)
    assert all(arrays[0].shape[1] == arrays[1].shape[0] for arrays, _ in drawn)
    assert frameworks.samples(einsum, {"spec": "no such spec"}) == []
    cases = frameworks.framework_cases(bridge_host, "linalg.einsum", {"spec": "no such spec"})
    outcome = cases[0].run()
    assert outcome.status == "skipped" and "--attr" in outcome.message


def test_output_allocator_is_scoped_to_its_thread_and_restored(bridge_host: tf.Host) -> None:
    cpu = bridge_host.backend("cpu")
    made = []

    def make(nbytes: int, dt: tf.DType) -> np.ndarray:
        made.append(np.zeros(nbytes // dt.itemsize, dt.numpy))
        return made[-1]

    other: list[tf.Tensor] = []
    with OutputAllocator(cpu, make) as allocator:
        mine = cpu.empty("float32", (4,))
        worker = threading.Thread(target=lambda: other.append(cpu.empty("float32", (4,))))
        worker.start()
        worker.join()
    assert len(made) == 1 and allocator.buffer_of(mine.storage) is made[0]
    assert allocator.buffer_of(other[0].storage) is None  # the other thread kept the runtime's
    assert "_allocate" not in vars(cpu)  # the runtime's own allocator again
    cpu.empty("float32", (4,))
    assert len(made) == 1


def test_a_plan_recorded_under_an_output_allocator_allocates_from_the_runtime_after_it() -> None:
    """A call planned while a framework's allocator is the runtime's (its recordings made in
    the bridge) replays into the framework's buffers there, and into the runtime's own once the
    allocator is gone: the replay never keeps the framework's allocation as its own."""
    host = tf.Host()
    cpu = host.backend("cpu")
    a = cpu.upload(np.ones(4, np.float32))
    made: list[np.ndarray] = []

    def make(nbytes: int, dt: tf.DType) -> np.ndarray:
        made.append(np.zeros(nbytes // dt.itemsize, dt.numpy))
        return made[-1]

    with OutputAllocator(cpu, make) as allocator:
        for _ in range(3):  # recorded twice (planned), then replayed
            out = host.run("ext_add_kernel.add", a, a)
        assert allocator.buffer_of(out.storage) is made[-1] and len(made) == 3
    assert "replay" in host.op("ext_add_kernel.add").plans().values()
    out = host.run("ext_add_kernel.add", a, a)
    assert len(made) == 3 and out.storage.kind == "owned"
    np.testing.assert_array_equal(out.download(), [2, 2, 2, 2])

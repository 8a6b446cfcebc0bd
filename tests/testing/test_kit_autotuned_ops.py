# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""The kit on ops whose DSL kernel is ``@K.autotune``d: the ``compile`` check compiles every
config and names a failing one by its constants; the checks that call the op run it with
autotuning frozen, so tuning's waits never count against the op, whatever the kernel cache
holds, and later launches still tune."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import _kernel_cache as kc
from tenferro_host.provider import _tuning_tables as tables
from tenferro_host.testing import run_conformance
from tenferro_host.testing.conformance import BACKEND_CHECKS

CONFIGS = [K.Config({"U": 1}, dim=64), K.Config({"U": 2}, dim=(128, 1))]


@K.kernel
def doubled(out: K.Array[K.f32], x: K.Array[K.f32], U: K.Const[int] = 1):  # noqa: N803
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * 2.0


@K.kernel
def doubled_but_one(out: K.Array[K.f32], x: K.Array[K.f32], U: K.Const[int] = 1):  # noqa: N803
    """U=2 asks for an empty shared array: that config never compiles (the interpreter runs
    the first config only)."""
    unused = K.shared(K.f32, 2 - U)  # noqa: F841
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * 2.0


def waiting_clock(calls: list[int]) -> Callable[..., float]:
    """A timer that waits as the wall clock does (a synchronization before and after the
    launch) and finds U=2 faster; ``calls`` records each config it timed."""

    def timer(js: Any, config: K.Config, run: Callable[[], None]) -> float:
        calls.append(config["U"])
        js.runtime.synchronize()
        run()
        js.runtime.synchronize()
        return 1.0 / config["U"]

    return timer


def register(host: tf.Host, name: str, kernel: Any, calls: list[int]) -> K.Autotuned:
    """Op ``name`` (x * 2, float32) whose dsl variant launches ``kernel`` autotuned."""
    tuned = K.autotune(CONFIGS, key=["x"], timer=waiting_clock(calls), warmup=1, repeats=1)(kernel)

    def variant(ex: Any, x: tf.Tensor) -> tf.Tensor:
        if not x.is_compact():
            x = ex.runtime.canonicalize(x)
        with ex.jit(name) as js:
            out = js.alloc_output(x.dtype, x.shape)
            js.launch(tuned, lambda config: -(-out.numel // config.dim[0]), None, out, x)
        return out

    view = host.registry.staging(name)
    view.add_op(
        tf.OpSpec(
            name=name,
            signature=tf.Signature(inputs=("x",), outputs=("out",), dtypes=("float32",)),
            reference=lambda x: x * 2,
            variants={"dsl": variant},
        )
    )
    view.commit()
    return tuned


def test_the_compile_check_compiles_every_config_and_names_a_failing_one(host: tf.Host) -> None:
    calls: list[int] = []
    register(host, "kit_autotune.good", doubled, calls)
    register(host, "kit_autotune.bad", doubled_but_one, calls)
    good = run_conformance(host, "kit_autotune.good", skip=list(BACKEND_CHECKS))
    assert [(o.case.check, o.status) for o in good.outcomes] == [("compile", "passed")]
    (bad,) = run_conformance(host, "kit_autotune.bad", compile_only=True).outcomes
    assert bad.status == "failed", bad.message
    assert "DSL kernel 'doubled_but_one' (config {'U': 2}) of op 'kit_autotune.bad'" in bad.message
    assert calls == []  # the interpreter run that finds the kernels does not tune


@pytest.mark.parametrize("cache", ["off", "on"])
def test_checks_calling_the_op_never_count_tuning_waits_against_it(
    host: tf.Host, cache: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "kernel-cache"
    monkeypatch.setenv(kc.ENV_DIR, str(root))
    monkeypatch.setenv(kc.ENV_SWITCH, cache)
    monkeypatch.delenv("TENFERRO_AUTOTUNE", raising=False)
    calls: list[int] = []
    tuned = register(host, "kit_autotune.tuned", doubled, calls)
    report = run_conformance(host, "kit_autotune.tuned", backends=["cpu"], skip=["compile"])
    assert report.passed, [(o.case.id, o.message) for o in report.failures]
    assert {o.case.check: o.status for o in report.outcomes} == dict.fromkeys(
        BACKEND_CHECKS, "passed"
    )
    assert calls == [] and tuned.choices() == {}  # nothing timed, nothing remembered
    assert tables.learned_tables(root) == []  # nor learned on this machine

    rt = host.backend("cpu")
    x = np.arange(7, dtype=np.float32)
    assert host.run("kit_autotune.tuned", rt.upload(x)).download().tolist() == (x * 2).tolist()
    ((_, key), choice), *_ = tuned.choices().items()
    assert json.loads(key) == {"x": "float32[7]"}
    assert (choice.source, choice.config) == ("tuned", CONFIGS[1])  # after the kit: tuned

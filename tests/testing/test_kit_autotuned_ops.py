# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""The kit on ops whose DSL kernel is ``@K.autotune``d: the ``compile`` check compiles every
config and names a failing one by its constants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tenferro_host as tf
from tenferro_host import kernel as K
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

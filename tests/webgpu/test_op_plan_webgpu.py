# DSL annotations (K.Array[K.F]) are not Python types.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""Op plans on WebGPU (llvmpipe here): a planned call gives what the full path gives, bit for
bit, and raises what it raises, for random shapes, dtypes, views, aliasing and attributes.

Each draw runs the same call three times on fresh copies of its inputs, planned (two recordings,
then a replay) and with plans off (``TENFERRO_OP_PLAN=0``'s switch), and compares the last
outcome: the output and every input after the call (the accumulate op writes its first input),
or the error's type and message. Draws that a replay can serve must have been replayed
(counted at :class:`WebGpuReplay`), so the comparison cannot pass on two full paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tenferro_host_webgpu._replay import WebGpuReplay

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.layout import compact_strides
from tenferro_host.provider import REPLAY_MISS, _op_plan

ADD = "ext_add_kernel.add"
ACC = "tests_wgpu_plan.accumulate"
TWO = "tests_wgpu_plan.two_steps"


@K.kernel
def accumulate_kernel(out: K.Array[K.F], acc: K.Array[K.F], x: K.Array[K.F], scale: K.F):
    """``out = acc * scale + x`` and ``acc`` the same, elementwise over views of any layout."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        v = acc[i] * scale + x[i]
        out[i] = v
        acc[i] = v


def _accumulate(ex: Any, acc: tf.Tensor, x: tf.Tensor, scale: float = 1.0) -> tf.Tensor:
    """Views go to the kernel as they are (their layout in the uniform block); no copies."""
    if acc.shape != x.shape:
        raise tf.ShapeError(f"acc is {acc.shape} but x is {x.shape}", argument="x", op=ACC)
    with ex.jit(ACC) as js:
        out = js.alloc_output(acc.dtype, acc.shape)
        js.launch(
            accumulate_kernel, js.cube_count_1d(out.numel), js.cube_dim_1d(), out, acc, x, scale
        )
    return out


def _two_steps(ex: Any, acc: tf.Tensor, x: tf.Tensor, scale: float = 1.0) -> Any:
    """Two launches and two outputs, the second launch reading (and writing) the first's."""
    if acc.shape != x.shape:
        raise tf.ShapeError(f"acc is {acc.shape} but x is {x.shape}", argument="x", op=TWO)
    with ex.jit(TWO) as js:
        first, second = (js.alloc_output(acc.dtype, acc.shape) for _ in range(2))
        count, dim = js.cube_count_1d(first.numel), js.cube_dim_1d()
        js.launch(accumulate_kernel, count, dim, first, acc, x, scale)
        js.launch(accumulate_kernel, count, dim, second, first, x, scale)
    return first, second


@pytest.fixture(scope="module")
def host(webgpu_host: tf.Host) -> tf.Host:
    if ACC not in webgpu_host.registry.ops:
        view = webgpu_host.registry.staging("tests_wgpu_plan")
        for name, variant, outputs in ((ACC, _accumulate, ("out",)), (TWO, _two_steps, "ab")):
            view.add_op(
                tf.OpSpec(
                    name=name,
                    signature=tf.Signature(
                        inputs=("acc", "x"), outputs=tuple(outputs), attributes={"scale": float}
                    ),
                    reference=lambda acc, x, scale=1.0: acc * scale + x,
                    variants={"dsl": variant},
                )
            )
        view.commit()
    return webgpu_host


@pytest.fixture(autouse=True)
def plans_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about plans: on, whatever TENFERRO_OP_PLAN says (both paths compared)."""
    monkeypatch.setattr(_op_plan, "ENABLED", True)


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the replays that served a call (a guard miss is not one)."""
    served = [0]
    replay = WebGpuReplay.__call__

    def counted(self: WebGpuReplay, tensors: tuple[Any, ...]) -> Any:
        out = replay(self, tensors)
        served[0] += out is not REPLAY_MISS
        return out

    monkeypatch.setattr(WebGpuReplay, "__call__", counted)
    return served


VIEWS = ("compact", "offset", "stepped", "transposed")


def _view(rt: Any, data: np.ndarray, how: str) -> tf.Tensor:
    """A tensor of ``data``'s values in the layout ``how`` (a view of a larger upload)."""
    if how == "compact":
        return rt.upload(data)
    if how == "offset":  # compact, three elements into its storage
        base = rt.upload(np.concatenate([np.zeros(3, data.dtype), data.reshape(-1, order="F")]))
        return tf.Tensor(base.storage, base.dtype, data.shape, compact_strides(data.shape), 3)
    if how == "stepped":  # every other element of the last axis
        return rt.upload(np.repeat(data, 2, axis=-1))[..., ::2]
    return rt.upload(np.ascontiguousarray(np.swapaxes(data, 0, -1))).transpose()


def _outcome(host: tf.Host, planned: bool, call: Any) -> Any:
    """The last of three calls: ("ran", output and inputs after it) or ("raised", type, msg)."""
    saved, _op_plan.ENABLED = _op_plan.ENABLED, planned
    try:
        for _ in range(3):
            tensors, attrs = call()
            try:
                out = host.run(tensors[0], *tensors[1:], **attrs)
            except tf.TenferroError as exc:
                result: Any = ("raised", type(exc).__name__, str(exc))
            else:
                outs = out if isinstance(out, tuple) else (out,)
                result = ("ran", [_bits(t) for t in (*outs, *tensors[1:])])
    finally:
        _op_plan.ENABLED = saved
    return result


def _bits(t: tf.Tensor) -> tuple[Any, ...]:
    host_copy = t.download()
    return (host_copy.dtype.str, host_copy.shape, host_copy.tobytes())


DTYPES = ("float32", "float16", "int32", "uint32")


@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    op=st.sampled_from((ADD, ACC, TWO)),
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple),
    views=st.tuples(st.sampled_from(VIEWS), st.sampled_from(VIEWS)),
    second=st.sampled_from(("own", "aliased", "other shape", "other dtype")),
    scale=st.sampled_from((1.5, -0.0, 2, "x")),
    seed=st.integers(0, 2**16),
)
def test_planned_and_full_path_agree(
    host, rt, replays, op, dtype, shape, views, second, scale, seed
):
    if dtype not in rt.supported_dtypes:
        dtype = "float32"
    rng = np.random.default_rng(seed)
    values = rng.integers(-50, 50, size=shape) if "int" in dtype else rng.normal(size=shape) * 8
    lhs = np.abs(values).astype(dtype) if dtype == "uint32" else values.astype(dtype)
    rhs = np.flip(lhs).copy()

    def call() -> tuple[tuple[Any, ...], dict[str, Any]]:
        a = _view(rt, lhs, views[0])
        if second == "aliased":
            b = a
        elif second == "other shape":
            b = rt.upload(rhs.reshape(-1)[:-1] if rhs.size else np.zeros(1, dtype))
        elif second == "other dtype":
            b = rt.upload(rhs.astype("float32" if dtype != "float32" else "int32"))
        else:
            b = _view(rt, rhs, views[1])
        return ((op, a, b), {} if op == ADD else {"scale": scale})

    before = replays[0]
    planned = _outcome(host, True, call)
    served = replays[0] - before
    full = _outcome(host, False, call)
    assert planned == full
    (_, *tensors), _ = call()
    compact = all(t.is_compact() for t in tensors)
    replayable = (
        planned[0] == "ran"
        and all(shape)
        and (op != ADD or compact)  # the add canonicalizes other views: a counted copy
    )
    assert (served > 0) is replayable, (planned[0], shape, views, second)


def test_a_read_only_written_input_misses_the_plan_and_raises_as_the_full_path(host, rt, replays):
    """The guard's own case: an input the kernel writes, lent read-only after the key was
    planned (WebGPU has no read-only import: the flag is set as a borrow would set it)."""
    ones = np.ones(64, np.float32)
    for _ in range(3):
        host.run(ACC, rt.upload(ones), rt.upload(ones), scale=2.0)
    assert replays[0] == 1
    acc = rt.upload(ones)
    acc.storage.read_only = True
    outcomes = []
    for planned in (True, False):
        saved, _op_plan.ENABLED = _op_plan.ENABLED, planned
        try:
            with pytest.raises(tf.TenferroError) as info:
                host.run(ACC, acc, rt.upload(ones), scale=2.0)
        finally:
            _op_plan.ENABLED = saved
        outcomes.append((type(info.value), str(info.value)))
    assert outcomes[0] == outcomes[1]
    assert replays[0] == 1  # the guard missed: no replay served it


def test_a_changed_fold_limit_misses_the_plan(host, fresh_rt, replays):
    """A grid folded under another limit than the plan's is folded anew on the full path."""
    x = np.arange(4096, dtype=np.float32)
    for _ in range(3):
        out = host.run(ADD, fresh_rt.upload(x), fresh_rt.upload(x))
    assert replays[0] == 1
    fresh_rt.max_workgroups_per_dimension = 4
    out = host.run(ADD, fresh_rt.upload(x), fresh_rt.upload(x))
    assert replays[0] == 1
    np.testing.assert_array_equal(out.download(), 2 * x)

"""Run one kernel launch on WebGPU and on the CPU interpreter from the same starting data.

Array arguments are :class:`View` s of a flat numpy storage (offset, shape, strides in
elements), so non-compact bindings are tested exactly as the interpreter sees them. Both sides
start from copies of the same storages; the results are the storages after the launch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import tenferro_host as tf
from support.dsl_harness import View, desc
from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import ArrayArg, run
from tenferro_host.tensor import Tensor


def _storages(args: tuple[Any, ...]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for a in args:
        if isinstance(a, View) and not any(a.storage is s for s in out):
            out.append(a.storage)
    return out


def on_interpreter(
    kernel: K.Kernel, count: Any, dim: Any, *args: Any, subgroup_size: int = 32, **consts: Any
) -> list[np.ndarray]:
    storages = _storages(args)
    copies = [s.copy() for s in storages]
    converted = []
    for a in args:
        if isinstance(a, View):
            flat = copies[next(i for i, s in enumerate(storages) if s is a.storage)]
            converted.append(ArrayArg(flat, a.offset, a.shape, a.strides))
        else:
            converted.append(a)
    spec = kernel.specialize([desc(a) for a in args], consts, "cpu")
    run(spec, _grid(count), _grid(dim), converted, subgroup_size)
    return copies


def rand(rng: np.random.Generator, n: int, dtype: str, low: float = -8, high: float = 8) -> Any:
    """``n`` random values of ``dtype`` in [low, high] (bools: fair coin; unsigned: from 0)."""
    if dtype == "bool":
        return rng.random(n) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, n).astype(dtype)
    lo = 0 if np.dtype(dtype).kind == "u" else int(low)
    return rng.integers(lo, int(high) + 1, n).astype(dtype)


def on_target(
    rt: Any,
    jit: Callable[[], Any],
    kernel: K.Kernel,
    count: Any,
    dim: Any,
    *args: Any,
    **consts: Any,
) -> list[np.ndarray]:
    """Upload the distinct storages to ``rt``, launch once inside ``jit()`` with views of them,
    download them."""
    storages = _storages(args)
    tensors = [rt.upload(s) for s in storages]
    converted: list[Any] = []
    for a in args:
        if isinstance(a, View):
            base = tensors[next(i for i, s in enumerate(storages) if s is a.storage)]
            converted.append(Tensor(base.storage, base.dtype, a.shape, a.strides, a.offset))
        else:
            converted.append(a)
    with jit() as js:
        js.launch(kernel, count, dim, *converted, **consts)
    return [t.download() for t in tensors]


def assert_same_on(
    rt: Any,
    jit: Callable[[], Any],
    kernel: K.Kernel,
    count: Any,
    dim: Any,
    *args: Any,
    rtol: float = 0.0,
    atol: float = 0.0,
    **consts: Any,
) -> None:
    """The launch leaves the same storages on ``rt`` (inside ``jit()``) as on the interpreter."""
    expected = on_interpreter(kernel, count, dim, *args, **consts)
    got = on_target(rt, jit, kernel, count, dim, *args, **consts)
    for e, g in zip(expected, got, strict=True):
        if rtol or atol:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


@contextmanager
def webgpu_jit(rt: Any, op: str = "tests.webgpu") -> Iterator[Any]:
    """A WebGPU JIT session on ``rt`` (its backend session around it)."""
    with rt.session() as s, tf.webgpu.exec_session(s).jit(op) as js:
        yield js


def _grid(value: Any) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    padded = (*dims, 1, 1)
    return (padded[0], padded[1], padded[2])


def assert_same(rt: Any, kernel: K.Kernel, *launch: Any, **options: Any) -> None:
    """The launch (:func:`assert_same_on`'s count, dim, arguments and keywords) gives the same
    storages on WebGPU as on the interpreter."""
    assert_same_on(rt, lambda: webgpu_jit(rt), kernel, *launch, **options)

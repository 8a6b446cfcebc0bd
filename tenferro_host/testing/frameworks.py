"""Framework checks: every op as a torch operator (``opcheck``) and a JAX primitive.

:func:`framework_cases` lists, for one op, the cases ``tenferro-host check --frameworks`` and
:func:`frameworks_test` run, as conformance :class:`~.conformance.Case` objects:

* ``torch-opcheck`` — the op exported with :mod:`tenferro_host.interop.torch` passes
  ``torch.library.opcheck`` (schema, fake kernel, autograd registration, AOT dispatch) and
  matches its reference, on sample inputs;
* ``jax`` — the op exported with :mod:`tenferro_host.interop.jax` matches its reference eagerly,
  under ``jax.jit`` and under ``jax.vmap`` over two samples.

The ops run through the bridges' process-wide host (a framework operator is global to the
process); ``host`` lists the op and the backends. Each runs on ``cpu``, and on ``cuda`` where
the framework and the host both have a GPU; a case whose framework is not installed is skipped,
naming the extra to install. Sample inputs are random arrays of the op's default dtype over
:data:`SAMPLE_SHAPES`, one shape per input, kept when the op's reference accepts them (with the
attributes given).
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ops import OpSpec
from .checks import as_outputs, default_dtype, random_array
from .conformance import Case, CaseSkipped, CheckFailure

if TYPE_CHECKING:
    from .._host import Host

#: Shapes tried for each input (every combination, in order) until the reference accepts two.
SAMPLE_SHAPES: tuple[tuple[int, ...], ...] = ((7,), (3, 4), (4, 5), (4, 4), (3, 4, 2), (4, 5, 2))

Sample = tuple[list[np.ndarray], dict[str, Any]]


def samples(spec: OpSpec, attrs: Mapping[str, Any], count: int = 2) -> list[Sample]:
    """Up to ``count`` input sets of distinct shapes that the op's reference accepts."""
    dt = default_dtype(spec.signature)
    rng = np.random.default_rng(0)
    found: list[Sample] = []
    for shapes in itertools.product(SAMPLE_SHAPES, repeat=len(spec.signature.inputs)):
        arrays = [random_array(rng, dt, s) for s in shapes]
        try:
            spec.reference(*arrays, **attrs)
        except Exception:  # noqa: BLE001 - the reference refusing a shape: try the next
            continue
        found.append((arrays, dict(attrs)))
        if len(found) == count:
            break
    return found


def _expect(
    spec: OpSpec, arrays: list[np.ndarray], attrs: dict[str, Any], got: Any, what: str
) -> None:
    """``got`` (framework outputs) against the reference, with the op's tolerances."""
    want = [np.asarray(w) for w in as_outputs(spec.reference(*arrays, **attrs))]
    have = [np.asarray(h) for h in as_outputs(got)]
    if len(want) != len(have):
        raise CheckFailure(f"{what}: {len(have)} outputs, the reference gives {len(want)}")
    for i, (w, h) in enumerate(zip(want, have, strict=True)):
        rtol, atol = spec.tolerance(np.dtype(w.dtype).name)
        if w.shape != h.shape or not np.allclose(h, w, rtol=rtol, atol=atol, equal_nan=True):
            raise CheckFailure(
                f"{what}: output {i} differs from the reference (shape {h.shape} vs {w.shape}, "
                f"largest difference {np.max(np.abs(h - w)) if h.shape == w.shape else 'n/a'})"
            )


def _need(framework: str) -> None:
    if importlib.util.find_spec(framework) is None:
        raise CaseSkipped(
            f"{framework} is not installed; install it (pip install 'tenferro-host[{framework}]')"
        )


def _samples_or_skip(spec: OpSpec, attrs: Mapping[str, Any]) -> list[Sample]:
    found = samples(spec, attrs)
    if not found:
        raise CaseSkipped(
            f"the reference of {spec.name} accepts none of the sample shapes with attributes "
            f"{dict(attrs)}; pass the attributes it needs (--attr NAME=VALUE)"
        )
    return found


def check_torch(spec: OpSpec, backend: str, attrs: Mapping[str, Any]) -> None:
    """``opcheck`` and the reference, through the op's torch operator on ``backend``."""
    _need("torch")
    import torch

    from ..interop import torch as tf_torch

    device = _torch_device(backend)
    op = tf_torch.export(spec.name)  # the bridges' host: operators are process-global
    for arrays, kw in _samples_or_skip(spec, attrs):
        args = tuple(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in arrays)
        try:
            torch.library.opcheck(op.packet, args, op.op.encode_attributes(kw))
        except torch.library.OpCheckError as exc:  # type: ignore[attr-defined]
            raise CheckFailure(f"opcheck: {exc}") from exc
        got = op(*args, **kw)
        outs = [t.cpu().numpy() for t in as_outputs(got)]
        _expect(spec, arrays, kw, outs, f"torch on {backend}, shapes {[a.shape for a in arrays]}")


def _torch_device(backend: str) -> Any:
    import torch

    if backend == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise CaseSkipped("torch has no CUDA device here (a CPU build, or no GPU)")
    return torch.device("cuda", 0)


def check_jax(spec: OpSpec, backend: str, attrs: Mapping[str, Any]) -> None:
    """The op's JAX primitive eagerly, under ``jit`` and under ``vmap``, vs the reference."""
    _need("jax")
    import jax

    from ..interop import jax as tf_jax

    platform = "cpu" if backend == "cpu" else "cuda"
    try:
        device = jax.devices(platform)[0]
    except RuntimeError as exc:
        raise CaseSkipped(f"JAX has no {platform} device here: {exc}") from exc
    op = tf_jax.export(spec.name)  # the bridges' host: targets are process-global
    found = _samples_or_skip(spec, attrs)
    for arrays, kw in found:
        args = [jax.device_put(a, device) for a in arrays]
        where = f"jax on {backend}, shapes {[a.shape for a in arrays]}"
        _expect(spec, arrays, kw, op(*args, **kw), f"{where}, eager")
        _expect(spec, arrays, kw, jax.jit(partial(op, **kw))(*args), f"{where}, jit")
    arrays, kw = found[0]
    stacked = [jax.device_put(np.stack([a, a + a]), device) for a in arrays]
    batched = as_outputs(jax.vmap(partial(op, **kw))(*stacked))
    for k in range(2):
        _expect(spec, [a * (k + 1) for a in arrays], kw, [b[k] for b in batched], "jax vmap")


_CHECKS: dict[str, Callable[[OpSpec, str, Mapping[str, Any]], None]] = {
    "torch-opcheck": check_torch,
    "jax": check_jax,
}


def framework_cases(host: Host, name: str, attrs: Mapping[str, Any] | None = None) -> list[Case]:
    """The torch and JAX cases of op ``name`` on every backend the bridges serve here."""
    spec = host.registry.op(name).spec
    assert spec is not None
    out = []
    for backend, status in (("cpu", None), ("cuda", host.backend_status("cuda"))):
        has_jit = host.registry.jit_factory(backend) is not None
        variant = spec.variant_kind_for(backend, has_jit)
        if variant is None:
            continue
        reason = None if status is None or status.available else f"backend cuda: {status.reason}"
        for check, fn in _CHECKS.items():
            body = partial(fn, spec, backend, dict(attrs or {}))
            out.append(Case(spec.name, check, variant, backend, body, reason))
    return out


def frameworks_test(*ops: str, **attrs: Any) -> Callable[..., None]:
    """A pytest test running the framework cases of ``ops``, one test item per case.

    In a test module::

        test_frameworks = frameworks_test("my_pkg.add")
    """
    import pytest

    from ..interop._hosts import default_host

    host = default_host()  # framework operators are process-global: one host for all
    selected = [case for op in ops for case in framework_cases(host, op, attrs)]

    @pytest.mark.parametrize("tf_framework_case", selected, ids=[c.id for c in selected])
    def test_frameworks(tf_framework_case: Case) -> None:
        outcome = tf_framework_case.run()
        if outcome.status == "skipped":
            pytest.skip(outcome.message)
        if outcome.status != "passed":
            raise AssertionError(f"{tf_framework_case.id}: {outcome.status}: {outcome.message}")

    return test_frameworks


__all__ = [
    "SAMPLE_SHAPES",
    "check_jax",
    "check_torch",
    "framework_cases",
    "frameworks_test",
    "samples",
]

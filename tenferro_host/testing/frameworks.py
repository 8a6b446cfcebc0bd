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
naming the extra to install.

Sample inputs are drawn as the conformance suite's single-call checks draw theirs
(:func:`.suite_shapes.probe_sets`): shapes from the op's declared ``Signature.shapes`` (odd
sizes first, then sizes no multiple of a cube side, ones, empty), or for an op that declares
none every input of one shape from :data:`.suite_shapes.PROBE_SHAPES`; random arrays of the
op's default dtype, kept when its reference accepts them with the attributes given (default:
the op's ``sample_attributes``). Outputs are compared with the reference as the ``values``
check compares them (:func:`.backend_checks.reference_mismatch`: the op's ``rtol``/``atol``,
grown by its ``reduction_length``). A failing ``opcheck`` is a failed case naming each of its
tests that failed and why, on every torch version (``opcheck(..., raise_exception=False)``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ops import OpSpec
from .backend_checks import reference_mismatch, reference_refusal
from .case import Case, CaseSkipped, CheckFailure, Settings
from .checks import as_outputs, default_dtype, random_arrays
from .suite_shapes import probe_sets

if TYPE_CHECKING:
    from .._host import Host

Sample = tuple[list[np.ndarray], dict[str, Any]]


def samples(spec: OpSpec, attrs: Mapping[str, Any], count: int = 2) -> list[Sample]:
    """Up to ``count`` input sets of distinct shapes, drawn from the op's declared shapes as
    the conformance suite draws them (:func:`.suite_shapes.probe_sets`), that the op's
    reference accepts with ``attrs`` (default: the op's ``sample_attributes``)."""
    cfg = Settings(attrs=spec.signature.attributes_or_samples(attrs))
    dt = default_dtype(spec.signature)
    found: list[Sample] = []
    for seed, shape_set in enumerate(probe_sets(spec, cfg.attrs)):
        arrays = random_arrays(shape_set.shapes, dt, seed)
        if reference_refusal(spec, arrays, cfg) is None:
            found.append((arrays, dict(cfg.attrs)))
            if len(found) == count:
                break
    return found


def _expect(
    spec: OpSpec, arrays: list[np.ndarray], attrs: dict[str, Any], got: Any, what: str
) -> None:
    """``got`` (framework outputs numpy reads) against the reference on ``arrays``, as the
    conformance ``values`` check compares: the op's tolerance rule for these shapes."""
    problem = reference_mismatch(spec, arrays, got, Settings(attrs=attrs))
    if problem is not None:
        raise CheckFailure(f"{what}: {problem}")


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
            f"{spec.signature.attributes_or_samples(attrs)}; pass the attributes it needs "
            "(--attr NAME=VALUE)"
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
        where = f"torch on {backend}, shapes {[a.shape for a in arrays]}"
        # raise_exception=False: opcheck returns {test: "SUCCESS" or the exception} instead of
        # raising OpCheckError, which torch.library does not export (2.11, 2.13: it lives in the
        # private torch.testing._internal.optests)
        results = torch.library.opcheck(
            op.packet, args, op.op.encode_attributes(kw), raise_exception=False
        )
        _opcheck_passed(results, where)
        got = op(*args, **kw)
        outs = [t.cpu().numpy() for t in as_outputs(got)]
        _expect(spec, arrays, kw, outs, where)


def _opcheck_passed(results: Mapping[str, Any], where: str) -> None:
    """CheckFailure naming each test of ``opcheck(..., raise_exception=False)``'s ``results``
    that did not succeed, with what it raised."""
    failed = {test: r for test, r in results.items() if not (isinstance(r, str) and r == "SUCCESS")}
    if failed:
        found = "; ".join(f"{test} failed: {type(r).__name__}: {r}" for test, r in failed.items())
        raise CheckFailure(f"opcheck, {where}: {found}")


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
    "check_jax",
    "check_torch",
    "framework_cases",
    "frameworks_test",
    "samples",
]

"""The conformance suite: everything an op's ``OpSpec`` promises, checked case by case.

:func:`cases` lists the checks of one op; each :class:`Case` runs alone and yields an
:class:`Outcome` (passed, failed, skipped with the reason, or error: the op raised);
:func:`run_conformance` runs the cases of several ops and gives a :class:`Report` (its
``failures`` are the failures-only view). Every variant is forced one by one on every backend
it claims (``cpu`` on cpu, ``cuda-raw`` on cuda, ``dsl`` on every backend with a DSL provider,
the CPU interpreter included). The checks, by name (``skip=`` leaves some out):

* ``values`` — every declared dtype the backend stores, over the shapes the op declares (see
  :mod:`.suite_shapes`), vs the reference with the op's tolerance rule; outputs must be
  Tensors of the session's runtime with the dtypes and shapes of the op's rules; no upload,
  download, peer copy or synchronization happens inside the call (counters; the kit calls ops
  with autotuning frozen, so tuning's waits are not counted);
* ``views`` — transposed, sliced and negative-step inputs: right, or a typed error;
* ``inputs`` — an undeclared dtype and another runtime's tensor get typed errors;
* ``sessions`` — no session or handle outlives the session the variant ran in;
* GPU-less (backend ``none``, :mod:`.compile_checks`): ``nvrtc`` (declared CUDA sources),
  ``compile`` (the DSL kernels, every config of an autotuned one, for CUDA and WGSL),
  ``launch-args`` (cuda-raw launches).

While a case runs, fresh CPU memory is poisoned (:func:`poison_fresh_memory`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..ops import OpSpec
from .backend_checks import (
    QUIET_COUNTERS,
    check_inputs,
    check_sessions,
    check_values,
    check_views,
    run_variant,
)
from .case import (
    STATUSES,
    Case,
    CaseSkipped,
    CheckFailure,
    Outcome,
    Settings,
    poison_fresh_memory,
)
from .compile_checks import check_dsl_compiles, check_kernel_sources, check_raw_launches
from .suite_shapes import SHAPES, VIEWS

if TYPE_CHECKING:
    from .._host import Host

#: The checks run on each (variant, backend) pair, in order.
BACKEND_CHECKS: dict[str, Callable[..., None]] = {
    "values": check_values,
    "views": check_views,
    "inputs": check_inputs,
    "sessions": check_sessions,
}
#: Every check's name, as ``skip=`` and a case's ``check`` spell it.
CHECKS = (*BACKEND_CHECKS, "nvrtc", "compile", "launch-args")


def claimed_backends(host: Host, spec: OpSpec, kind: str) -> list[str]:
    """The backend kinds variant ``kind`` claims: its native one, or every DSL backend."""
    if kind == "dsl":
        return [k for k in sorted(host.registry.providers) if host.registry.jit_factory(k)]
    return [b for b, v in (("cpu", "cpu"), ("cuda", "cuda-raw")) if v == kind]


def _skipped_checks(skip: Sequence[str]) -> set[str]:
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ValidationError(
            f"skip names {unknown}, which are not checks; use {', '.join(CHECKS)}",
            argument="skip",
        )
    return set(skip)


def cases(
    host: Host,
    name: str,
    *,
    backends: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    compile_only: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    attrs: Mapping[str, Any] | None = None,
    skip: Sequence[str] = (),
) -> list[Case]:
    """Every case of op ``name``; ``backends``/``variants`` narrow them, ``compile_only``
    keeps the GPU-less ones, ``skip`` leaves out checks by name (:data:`CHECKS`);
    ``rtol``/``atol`` override the op's tolerances and ``attrs`` are passed to every call of
    the op and its reference (default: the op's ``sample_attributes``)."""
    spec = host.registry.op(name).spec
    assert spec is not None
    skipped = _skipped_checks(skip)
    out: list[Case] = []

    def add(
        check: str,
        kind: str,
        backend: str,
        body: Callable[[], None],
        unavailable: str | None = None,
    ) -> None:
        if check not in skipped:
            out.append(Case(spec.name, check, kind, backend, body, unavailable))

    cfg = Settings(rtol, atol, spec.signature.attributes_or_samples(attrs))
    chosen = [k for k in spec.variants if variants is None or k in variants]
    if not compile_only:
        for kind in chosen:
            for backend in claimed_backends(host, spec, kind):
                if backends is not None and backend not in backends:
                    continue
                status = host.backend_status(backend)
                reason = None if status.available else f"backend {backend!r}: {status.reason}"
                for check, fn in BACKEND_CHECKS.items():
                    add(check, kind, backend, partial(fn, host, spec, kind, backend, cfg), reason)
    if spec.kernels:
        add("nvrtc", "kernels", "none", lambda: check_kernel_sources(spec))
    if "dsl" in chosen:
        add("compile", "dsl", "none", lambda: check_dsl_compiles(spec, host.backend("cpu"), cfg))
    if "cuda-raw" in chosen:
        add(
            "launch-args",
            "cuda-raw",
            "none",
            lambda: check_raw_launches(spec, host.backend("cpu"), cfg),
        )
    return out


def run_cases(
    selected: Sequence[Case], progress: Callable[[Outcome], None] | None = None
) -> list[Outcome]:
    """Run every case in order; ``progress`` sees each outcome as it arrives."""
    outcomes = []
    for case in selected:
        outcome = case.run()
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return outcomes


@dataclass(frozen=True)
class Report:
    """The outcomes of a conformance run, with its failures-only view and counts."""

    outcomes: tuple[Outcome, ...]

    @property
    def failures(self) -> list[Outcome]:
        """Only the cases that failed or raised (``error``)."""
        return [o for o in self.outcomes if o.bad]

    @property
    def passed(self) -> bool:
        """No case failed or raised (skipped ones say why in their message)."""
        return not self.failures

    def summary(self) -> dict[str, int]:
        """How many cases ended in each status."""
        counts = Counter(o.status for o in self.outcomes)
        return {status: counts.get(status, 0) for status in STATUSES}


def run_conformance(
    host: Host,
    *ops: str,
    backends: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    compile_only: bool = False,
    skip: Sequence[str] = (),
    rtol: float | None = None,
    atol: float | None = None,
    attrs: Mapping[str, Any] | None = None,
    progress: Callable[[Outcome], None] | None = None,
) -> Report:
    """Every case of ``ops`` (the arguments of :func:`cases`), run in order.

    >>> import tenferro_host as tf
    >>> report = run_conformance(tf.Host(), "ext_add_kernel.add", backends=["cpu"],
    ...                          skip=["compile", "launch-args", "nvrtc"])
    >>> report.passed, report.failures, report.summary()["failed"]
    (True, [], 0)
    """
    _skipped_checks(skip)
    selected = [
        case
        for op in ops
        for case in cases(
            host,
            op,
            backends=backends,
            variants=variants,
            compile_only=compile_only,
            rtol=rtol,
            atol=atol,
            attrs=attrs,
            skip=skip,
        )
    ]
    return Report(tuple(run_cases(selected, progress)))


def conformance_test(*ops: str, **attrs: Any) -> Callable[[Any], None]:
    """A pytest test running every conformance case of ``ops``, one test item per case.

    In a test module::

        test_conformance = conformance_test("my_pkg.add")
        test_scale = conformance_test("my_pkg.scale", factor=2.5)  # attributes to pass

    (the tenferro-host pytest plugin parametrizes it; ``--tf-backends``, ``--tf-variants``
    and ``--tf-compile-only`` select the cases).
    """

    def test_conformance(tf_case: Case) -> None:
        outcome = tf_case.run()
        if outcome.status == "skipped":
            import pytest

            pytest.skip(outcome.message)
        if outcome.status != "passed":
            raise AssertionError(f"{tf_case.id}: {outcome.status}: {outcome.message}")

    test_conformance.tf_conformance_ops = ops  # type: ignore[attr-defined]
    test_conformance.tf_conformance_attrs = attrs  # type: ignore[attr-defined]
    return test_conformance


__all__ = [
    "BACKEND_CHECKS",
    "CHECKS",
    "QUIET_COUNTERS",
    "SHAPES",
    "STATUSES",
    "VIEWS",
    "Case",
    "CaseSkipped",
    "CheckFailure",
    "Outcome",
    "Report",
    "Settings",
    "cases",
    "claimed_backends",
    "conformance_test",
    "poison_fresh_memory",
    "run_cases",
    "run_conformance",
    "run_variant",
]

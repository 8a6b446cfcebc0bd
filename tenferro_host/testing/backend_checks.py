"""The conformance checks run on one (variant, backend) pair: values, views, inputs, sessions.

Each forces variant ``kind`` of the op in a fresh session of the backend (:func:`run_variant`,
autotuning frozen), over the shape sets of :mod:`.suite_shapes`, and raises
:class:`CheckFailure` saying what the op got wrong or :class:`CaseSkipped` saying why nothing
could run.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import ALL, DType
from ..dtypes import dtype as resolve_dtype
from ..errors import TenferroError, UnsupportedError
from ..ops import OpSpec
from ..provider._autotuning import frozen_launches
from ..provider._session import Session, SessionHandle
from ..tensor import Tensor
from .case import CaseSkipped, CheckFailure, Settings
from .checks import (
    as_outputs,
    compare_outputs,
    default_dtype,
    download_all,
    output_problem,
    random_arrays,
)
from .suite_shapes import ShapeSet, probe_sets, value_sets, view_cases

if TYPE_CHECKING:
    from .._host import Host
    from ..provider._runtime import Runtime

#: Counters that must not move while a variant runs (implicit transfers, host waits).
QUIET_COUNTERS = ("uploads", "downloads", "peer_copies", "synchronizations")


@dataclass
class VariantRun:
    """A forced variant call: its result, counter movements and the sessions it opened."""

    result: Any
    moved: dict[str, int]
    sessions: list[weakref.ref[Session]]


def _session_tree(session: Session) -> Iterator[Session]:
    yield session
    for child in session._children or ():
        yield from _session_tree(child)


def run_variant(
    spec: OpSpec, kind: str, runtime: Runtime, tensors: Sequence[Any], attrs: dict[str, Any]
) -> VariantRun:
    """Call variant ``kind`` of ``spec`` directly in a fresh session of ``runtime``, its
    autotuned kernels frozen (:func:`~tenferro_host.provider._autotuning.frozen_launches`): tuning
    waits on the stream by design, and a wait it makes is not the op's."""
    before = runtime.stats()
    with frozen_launches(), runtime.session() as bs:
        result = spec.variants[kind](bs.exec_session(), *tensors, **attrs)
        sessions = [weakref.ref(s) for s in _session_tree(bs)]
    after = runtime.stats()
    moved = {k: after[k] - before[k] for k in QUIET_COUNTERS if after[k] != before[k]}
    return VariantRun(result, moved, sessions)


def _where(spec: OpSpec, kind: str, runtime: Runtime, what: str) -> str:
    return f"op {spec.name!r}, variant {kind!r} on {runtime.name} ({what})"


def _checked_run(
    spec: OpSpec, kind: str, runtime: Runtime, tensors: list[Tensor], what: str, cfg: Settings
) -> VariantRun:
    """run_variant, failing on undeclared outputs and on transfers or waits inside the call."""
    run = run_variant(spec, kind, runtime, tensors, dict(cfg.attrs))
    problem = output_problem(spec, kind, runtime, tensors, run.result, cfg.attrs)
    if problem is not None:
        raise CheckFailure(f"{problem} ({what})")
    if run.moved:
        moved = ", ".join(f"{k} +{v}" for k, v in run.moved.items())
        raise CheckFailure(
            f"{_where(spec, kind, runtime, what)} moved data or waited inside the call ({moved}); "
            "an op must not transfer implicitly or synchronize per launch"
        )
    return run


def reference_mismatch(
    spec: OpSpec, arrays: list[np.ndarray], result: Any, cfg: Settings
) -> str | None:
    """What differs between ``result`` (Tensors, or arrays numpy reads) and the reference on
    ``arrays`` (the overrides of ``cfg``, else the op's tolerance rule for their shapes), or
    None."""
    expected = as_outputs(spec.reference(*arrays, **cfg.attrs))
    shapes = [a.shape for a in arrays]
    return compare_outputs(
        download_all(result),
        expected,
        spec.signature.outputs,
        cfg.rtol,
        cfg.atol,
        spec,
        shapes,
        cfg.attrs,
    )


def stored_dtypes(spec: OpSpec, runtime: Runtime) -> list[DType]:
    """The op's declared dtypes that ``runtime`` stores."""
    return [resolve_dtype(n) for n in spec.signature.dtypes if n in runtime.supported_dtypes]


def reference_refusal(spec: OpSpec, arrays: list[np.ndarray], cfg: Settings) -> str | None:
    """None when the reference takes ``arrays``, else what it raised (the shapes are not the
    op's)."""
    try:
        spec.reference(*arrays, **cfg.attrs)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def probe_set(spec: OpSpec, dt: DType, cfg: Settings) -> ShapeSet:
    """The first small shape set the reference takes; CaseSkipped when it takes none."""
    refused = None
    for candidate in probe_sets(spec, cfg.attrs):
        refused = reference_refusal(spec, random_arrays(candidate.shapes, dt), cfg)
        if refused is None:
            return candidate
    raise CaseSkipped(f"the reference refuses every shape the suite tries (last: {refused})")


def _nothing_ran(spec: OpSpec, runtime: Runtime, refused: str | None, typed: str | None) -> None:
    """A check that ran no input must say why instead of passing."""
    if typed is not None:
        raise CaseSkipped(f"{runtime.name} refused every input with a typed error: {typed}")
    if refused is not None:
        attributes = ", ".join(spec.signature.attributes)
        hint = f"; pass its attributes ({attributes}) with attrs= or --attr" if attributes else ""
        raise CheckFailure(
            f"the reference of op {spec.name!r} refused every input the suite tried "
            f"(last: {refused}); it must take the shapes and dtypes the op declares{hint}"
        )
    raise CaseSkipped(f"{runtime.name} stores none of the op's dtypes ({spec.signature.dtypes})")


def check_values(host: Host, spec: OpSpec, kind: str, backend: str, cfg: Settings) -> None:
    """Every stored dtype over the suite's shape sets vs the reference (the large set in the
    default dtype only; shapes the reference refuses are not the op's; an UnsupportedError is
    a typed refusal of this backend)."""
    runtime = host.backend(backend)
    default = default_dtype(spec.signature)
    ran, refused, typed = 0, None, None
    for dt in stored_dtypes(spec, runtime):
        for seed, shape_set in enumerate(value_sets(spec, cfg.attrs)):
            if shape_set.large and dt is not default:
                continue
            arrays = random_arrays(shape_set.shapes, dt, seed)
            why = reference_refusal(spec, arrays, cfg)
            if why is not None:
                refused = why
                continue
            what = f"{dt.name}, shape {shape_set}"
            tensors = [runtime.upload(a) for a in arrays]
            try:
                run = _checked_run(spec, kind, runtime, tensors, what, cfg)
            except UnsupportedError as exc:
                typed = str(exc)
                continue
            except TenferroError as exc:
                raise CheckFailure(
                    f"{_where(spec, kind, runtime, what)} raised {type(exc).__name__}: {exc}, "
                    "on inputs its reference accepts"
                ) from exc
            problem = reference_mismatch(spec, arrays, run.result, cfg)
            if problem is not None:
                raise CheckFailure(f"{_where(spec, kind, runtime, what)}: {problem}")
            ran += 1
    if not ran:
        _nothing_ran(spec, runtime, refused, typed)


def _compact_problem(
    spec: OpSpec, kind: str, runtime: Runtime, arrays: list[np.ndarray], cfg: Settings
) -> str | None:
    """What is wrong with the variant on compact copies of ``arrays``, or None."""
    compact = [np.ascontiguousarray(a) for a in arrays]
    tensors = [runtime.upload(a) for a in compact]
    try:
        result = run_variant(spec, kind, runtime, tensors, dict(cfg.attrs)).result
    except TenferroError as exc:
        return f"raised {type(exc).__name__}: {exc}"
    return reference_mismatch(spec, compact, result, cfg)


def check_views(host: Host, spec: OpSpec, kind: str, backend: str, cfg: Settings) -> None:
    """Non-compact inputs give the reference's result or a typed error, never a wrong one.

    A wrong result on a view blames the layout only when the same values, compact, are right.
    """
    runtime = host.backend(backend)
    dt = default_dtype(spec.signature)
    if dt.name not in runtime.supported_dtypes or not spec.signature.inputs:
        raise CaseSkipped(f"{runtime.name} stores none of the op's dtypes or it has no inputs")
    ran, refused = 0, None
    for seed, case in enumerate(view_cases(spec, cfg.attrs)):
        bases = random_arrays(case.bases, dt, seed)
        arrays = case.apply(bases)
        why = reference_refusal(spec, arrays, cfg)
        if why is not None:
            refused = why
            continue
        ran += 1
        tensors = case.apply([runtime.upload(b) for b in bases])
        what = f"{dt.name} inputs {case.name}, shape {', '.join(str(a.shape) for a in arrays)}"
        try:
            run = _checked_run(spec, kind, runtime, tensors, what, cfg)
        except TenferroError:
            continue  # a typed refusal of the layout is conforming
        problem = reference_mismatch(spec, arrays, run.result, cfg)
        if problem is None:
            continue
        wrong_compact = _compact_problem(spec, kind, runtime, arrays, cfg)
        where = _where(spec, kind, runtime, what)
        if wrong_compact is not None:
            raise CheckFailure(
                f"{where}: {problem}; compact copies of the same values are wrong too, so the "
                "layout is not to blame: fix the values first (see the values check)"
            )
        raise CheckFailure(
            f"{where}: {problem}; the same values compact are right, so the variant accepted a "
            "non-compact input silently: canonicalize it (runtime.canonicalize) or raise "
            "InvalidLayoutError"
        )
    if not ran:
        raise CaseSkipped(f"the reference takes none of the suite's views (last: {refused})")


def check_inputs(host: Host, spec: OpSpec, kind: str, backend: str, cfg: Settings) -> None:
    """An undeclared dtype and a tensor of another runtime get typed errors."""
    runtime = host.backend(backend)
    sig = spec.signature
    if not sig.inputs:
        raise CaseSkipped("the op takes no tensors")
    shapes = probe_sets(spec, cfg.attrs)[0].shapes
    undeclared = [d for d in ALL if d.name not in sig.dtypes and d.name in runtime.supported_dtypes]
    if undeclared:
        dt = undeclared[0]
        tensors = [runtime.upload(a) for a in random_arrays(shapes, dt)]
        what = f"{dt.name} inputs, which the op does not declare"
        try:
            run_variant(spec, kind, runtime, tensors, dict(cfg.attrs))
        except TenferroError:
            pass
        except Exception as exc:
            raise CheckFailure(
                f"{_where(spec, kind, runtime, what)} raised {type(exc).__name__}: {exc}; "
                "raise a typed error (DTypeError) naming the dtypes it takes"
            ) from exc
        else:
            raise CheckFailure(
                f"{_where(spec, kind, runtime, what)} accepted them; raise DTypeError naming "
                f"the dtypes it takes ({', '.join(sig.dtypes)})"
            )
    other = host.new_backend(runtime.name)
    foreign = [other.upload(a) for a in random_arrays(shapes, default_dtype(sig))]
    try:
        host.run(spec.name, *foreign, backend=runtime.name, **cfg.attrs)
    except TenferroError:
        return
    raise CheckFailure(
        f"op {spec.name!r} on {runtime.name} accepted inputs of another runtime of the same "
        "device; they must get ForeignRuntimeError"
    )


def check_sessions(host: Host, spec: OpSpec, kind: str, backend: str, cfg: Settings) -> None:
    """After the call, no session (and so no handle of one) the variant opened is alive."""
    runtime = host.backend(backend)
    dt = default_dtype(spec.signature)
    if dt.name not in runtime.supported_dtypes:
        raise CaseSkipped(f"{runtime.name} does not store {dt.name}")
    shape_set = probe_set(spec, dt, cfg)
    tensors = [runtime.upload(a) for a in random_arrays(shape_set.shapes, dt)]
    run = _checked_run(spec, kind, runtime, tensors, f"{dt.name}, shape {shape_set}", cfg)
    escaped = [o for o in as_outputs(run.result) if isinstance(o, SessionHandle)]
    sessions = run.sessions
    del run  # drop the result's references before looking for survivors
    gc.collect()
    alive = [s for s in (ref() for ref in sessions) if s is not None]
    if escaped or alive:
        names = ", ".join(sorted({s.kind_name for s in alive})) or "a session handle"
        raise CheckFailure(
            f"op {spec.name!r}, variant {kind!r} on {runtime.name}: {names} outlived its "
            "session (the op kept a handle in a global, a cache or its result); keep tensors, "
            "never handles, beyond the `with` block"
        )


__all__ = [
    "QUIET_COUNTERS",
    "VariantRun",
    "check_inputs",
    "check_sessions",
    "check_values",
    "check_views",
    "probe_set",
    "reference_mismatch",
    "reference_refusal",
    "run_variant",
    "stored_dtypes",
]

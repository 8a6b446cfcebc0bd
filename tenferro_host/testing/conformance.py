"""The conformance suite: everything an op's ``OpSpec`` promises, checked case by case.

:func:`cases` lists the checks of one op; each :class:`Case` runs alone and yields an
:class:`Outcome` (passed, failed, skipped with the reason, or error: the op raised). Every
variant is forced one by one on every backend it claims (``cpu`` on cpu, ``cuda-raw`` on cuda,
``dsl`` on every backend with a DSL provider, the CPU interpreter included):

* ``values`` — every declared dtype the backend stores, over empty, odd and large shapes, vs
  the reference with the op's tolerances; outputs must be Tensors of the session's runtime with
  the dtypes and shapes of the op's rules; no upload, download, peer copy or synchronization
  happens inside the call (counters);
* ``views`` — transposed, sliced and negative-step inputs: right, or a typed error;
* ``inputs`` — an undeclared dtype and another runtime's tensor get typed errors;
* ``sessions`` — no session or handle outlives the session the variant ran in.

GPU-less cases (``compile`` on backend ``none``): every declared CUDA ``KernelSource`` compiles
with NVRTC for its archs, every DSL kernel the ``dsl`` variant launches compiles for cuda and
WGSL (:func:`tenferro_host.kernel.compile_only.compile_only`), and every ``cuda-raw`` launch's
argument list matches its kernel's PTX parameters (:mod:`.recording`).

While a case runs, fresh CPU memory is poisoned (:func:`poison_fresh_memory`).
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import ALL, DType
from ..dtypes import dtype as resolve_dtype
from ..errors import (
    ArgumentMismatchError,
    SymbolLookupError,
    TenferroError,
    UnsupportedError,
)
from ..ops import OpSpec
from ..provider.session import Session, SessionHandle
from ..tensor import Tensor
from .checks import (
    as_outputs,
    compare_outputs,
    default_dtype,
    download_all,
    output_problem,
    random_inputs,
)

if TYPE_CHECKING:
    from .._host import Host
    from ..provider.runtime import Runtime

#: Input shapes of the ``values`` check: empty, single, odd, 2-D, empty 2-D, large.
SHAPES: tuple[tuple[int, ...], ...] = ((0,), (1,), (7,), (3, 5), (0, 4), (129, 257))
#: Non-compact views of the ``views`` check: name -> (base shape, view); applies to numpy too.
VIEWS: dict[str, tuple[tuple[int, ...], Callable[[Any], Any]]] = {
    "transposed": ((5, 3), lambda t: t.T),
    "sliced with a step": ((11,), lambda t: t[1:10:2]),
    "negative steps": ((9,), lambda t: t[::-1]),
    "2-D sliced": ((6, 7), lambda t: t[1:5, ::2]),
}
#: Counters that must not move while a variant runs (implicit transfers, host waits).
QUIET_COUNTERS = ("uploads", "downloads", "peer_copies", "synchronizations")
STATUSES = ("passed", "failed", "skipped", "error")


class CheckFailure(AssertionError):  # noqa: N818 - public API, a failed check
    """A case found the op not doing what it declares."""


class CaseSkipped(Exception):  # noqa: N818 - public API, a skip signal, not an error
    """A case cannot run here (backend unavailable, NVRTC missing ...); the reason says why."""


@contextmanager
def poison_fresh_memory(enabled: bool = True) -> Iterator[None]:
    """Fill fresh CPU storage (``empty``, ``alloc_output``) with NaN / 0xA5 bytes meanwhile."""
    from .._cpu_runtime import CpuRuntime

    before = CpuRuntime.poison_fresh_memory
    CpuRuntime.poison_fresh_memory = enabled
    try:
        yield
    finally:
        CpuRuntime.poison_fresh_memory = before


@dataclass(frozen=True)
class Outcome:
    """The result of one case."""

    case: Case
    status: str  # one of STATUSES
    message: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Case:
    """One check of one op: ``check`` for ``variant`` on ``backend`` (``none``: GPU-less)."""

    op: str
    check: str
    variant: str
    backend: str
    body: Callable[[], None] = field(repr=False, compare=False)
    unavailable: str | None = None  # why the backend cannot run here (known before running)

    @property
    def id(self) -> str:
        """The case's test id: ``op-variant-backend-check``."""
        return f"{self.op}-{self.variant}-{self.backend}-{self.check}"

    def run(self) -> Outcome:
        """Run the case; never raises except KeyboardInterrupt."""
        start = time.perf_counter()
        try:
            if self.unavailable is not None:
                raise CaseSkipped(self.unavailable)
            with poison_fresh_memory():
                self.body()
        except CheckFailure as exc:
            return Outcome(self, "failed", str(exc), time.perf_counter() - start)
        except CaseSkipped as exc:
            return Outcome(self, "skipped", str(exc), time.perf_counter() - start)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - an op's SystemExit must not end the run
            message = f"raised {type(exc).__name__}: {exc}"
            return Outcome(self, "error", message, time.perf_counter() - start)
        return Outcome(self, "passed", "", time.perf_counter() - start)


@dataclass(frozen=True)
class Settings:
    """What every case of one run shares: tolerance overrides and the attributes to pass."""

    rtol: float | None = None
    atol: float | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)


# -- running one variant -------------------------------------------------------------------------
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
    """Call variant ``kind`` of ``spec`` directly in a fresh session of ``runtime``."""
    before = runtime.stats()
    with runtime.session() as bs:
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


def _compare(
    spec: OpSpec,
    kind: str,
    runtime: Runtime,
    arrays: list[np.ndarray],
    run: VariantRun,
    what: str,
    cfg: Settings,
) -> str | None:
    expected = as_outputs(spec.reference(*arrays, **cfg.attrs))
    problem = compare_outputs(
        download_all(run.result), expected, spec.signature.outputs, cfg.rtol, cfg.atol, spec
    )
    return None if problem is None else f"{_where(spec, kind, runtime, what)}: {problem}"


def _stored_dtypes(spec: OpSpec, runtime: Runtime) -> list[DType]:
    return [resolve_dtype(n) for n in spec.signature.dtypes if n in runtime.supported_dtypes]


def _reference_refusal(spec: OpSpec, arrays: list[np.ndarray], cfg: Settings) -> str | None:
    """None when the reference takes ``arrays``, else what it raised (the shape is not the
    op's)."""
    try:
        spec.reference(*arrays, **cfg.attrs)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


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


# -- the checks on a backend ---------------------------------------------------------------------
def check_values(
    host: Host,
    spec: OpSpec,
    kind: str,
    backend: str,
    cfg: Settings,
    shapes: Sequence[tuple[int, ...]] = SHAPES,
) -> None:
    """Every stored dtype over ``shapes`` vs the reference (shapes the reference refuses are
    not the op's; an UnsupportedError is a typed refusal of this backend)."""
    runtime = host.backend(backend)
    ran, refused, typed = 0, None, None
    for dt in _stored_dtypes(spec, runtime):
        for seed, shape in enumerate(shapes):
            arrays = random_inputs(spec.signature, shape, dt, seed)
            why = _reference_refusal(spec, arrays, cfg)
            if why is not None:
                refused = why
                continue
            what = f"{dt.name}, shape {shape}"
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
            problem = _compare(spec, kind, runtime, arrays, run, what, cfg)
            if problem is not None:
                raise CheckFailure(problem)
            ran += 1
    if not ran:
        _nothing_ran(spec, runtime, refused, typed)


def check_views(
    host: Host,
    spec: OpSpec,
    kind: str,
    backend: str,
    cfg: Settings,
) -> None:
    """Non-compact inputs give the reference's result or a typed error, never a wrong one."""
    runtime = host.backend(backend)
    dt = default_dtype(spec.signature)
    if dt.name not in runtime.supported_dtypes or not spec.signature.inputs:
        raise CaseSkipped(f"{runtime.name} stores none of the op's dtypes or it has no inputs")
    ran, refused = 0, None
    for seed, (name, (base_shape, view)) in enumerate(VIEWS.items()):
        bases = random_inputs(spec.signature, base_shape, dt, seed)
        arrays = [view(b) for b in bases]
        why = _reference_refusal(spec, arrays, cfg)
        if why is not None:
            refused = why
            continue
        ran += 1
        tensors = [view(runtime.upload(b)) for b in bases]
        what = f"{dt.name} inputs {name}, shape {arrays[0].shape}"
        try:
            run = _checked_run(spec, kind, runtime, tensors, what, cfg)
        except TenferroError:
            continue  # a typed refusal of the layout is conforming
        problem = _compare(spec, kind, runtime, arrays, run, what, cfg)
        if problem is not None:
            raise CheckFailure(
                f"{problem}; the variant accepted a non-compact input silently: canonicalize it "
                "(runtime.canonicalize) or raise InvalidLayoutError"
            )
    if not ran:
        raise CaseSkipped(f"the reference takes none of the suite's views (last: {refused})")


def check_inputs(host: Host, spec: OpSpec, kind: str, backend: str, cfg: Settings) -> None:
    """An undeclared dtype and a tensor of another runtime get typed errors."""
    runtime = host.backend(backend)
    sig = spec.signature
    if not sig.inputs:
        raise CaseSkipped("the op takes no tensors")
    undeclared = [d for d in ALL if d.name not in sig.dtypes and d.name in runtime.supported_dtypes]
    if undeclared:
        dt = undeclared[0]
        tensors = [runtime.upload(a) for a in random_inputs(sig, (4,), dt)]
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
    arrays = random_inputs(sig, (4,), default_dtype(sig))
    foreign = [other.upload(a) for a in arrays]
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
    tensors = [runtime.upload(a) for a in random_inputs(spec.signature, (7,), dt)]
    run = _checked_run(spec, kind, runtime, tensors, f"{dt.name}, shape (7,)", cfg)
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


# -- GPU-less checks -----------------------------------------------------------------------------
def _nvrtc_or_skip() -> None:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError as exc:
        raise CaseSkipped(
            f"NVRTC is not installed ({exc}); pip install 'tenferro-host[cuda]'"
        ) from exc


def check_kernel_sources(spec: OpSpec) -> None:
    """Every declared CUDA KernelSource compiles with NVRTC for each of its archs."""
    from tenferro_host_cuda.nvrtc import NvrtcOptions, compile_source

    from .recording import kernel_text

    cuda = [k for k in spec.kernels if k.language == "cuda"]
    if not cuda:
        raise CaseSkipped("the op declares no CUDA KernelSource")
    _nvrtc_or_skip()
    for k in cuda:
        for arch in k.archs or ("sm_90",):
            try:
                compile_source(kernel_text(k), NvrtcOptions(arch=arch), name=f"{k.name}.cu")
            except TenferroError as exc:
                raise CheckFailure(
                    f"kernel {k.name!r} of op {spec.name!r} does not compile for {arch}: {exc}"
                ) from exc


class _LaunchRecorder:
    """Wraps a JIT session: records each launch's kernel and argument types, then runs it."""

    def __init__(self, js: Any, seen: dict[Any, tuple[Any, list[Any], dict[str, Any]]]) -> None:
        self._js = js
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._js, name)

    def __enter__(self) -> _LaunchRecorder:
        self._js.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._js.__exit__(*exc)

    def launch(self, kernel: Any, count: Any, dim: Any, *args: Any, **constants: Any) -> None:
        from ..kernel._kernel import ArrayDesc, ScalarDesc

        descs: list[Any] = []
        for a in args:
            t = a.tensor if hasattr(a, "tensor") and not isinstance(a, Tensor) else a
            if isinstance(t, Tensor):
                descs.append(ArrayDesc(t.dtype, t.ndim, t.is_compact()))
            elif isinstance(a, np.generic):
                descs.append(ScalarDesc(resolve_dtype(a.dtype)))
            else:
                descs.append(ScalarDesc())
        key = (id(kernel), tuple(descs), tuple(sorted(constants.items())))
        self._seen.setdefault(key, (kernel, descs, constants))
        self._js.launch(kernel, count, dim, *args, **constants)


class _RecordingJitExec:
    """An exec session whose ``jit(op)`` records launches."""

    def __init__(self, ex: Any, seen: dict[Any, Any]) -> None:
        self._ex = ex
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ex, name)

    def jit(self, op: str) -> _LaunchRecorder:
        return _LaunchRecorder(self._ex.jit(op), self._seen)


def check_dsl_compiles(spec: OpSpec, cpu: Runtime, cfg: Settings) -> None:
    """Each DSL kernel the ``dsl`` variant launches (seen on the CPU interpreter, every
    declared dtype) compiles for cuda (NVRTC) and WGSL; UnsupportedError is a typed refusal."""
    from ..kernel.compile_only import compile_only

    seen: dict[Any, tuple[Any, list[Any], dict[str, Any]]] = {}
    for dt in _stored_dtypes(spec, cpu):
        tensors = [cpu.upload(a) for a in random_inputs(spec.signature, (7,), dt)]
        with cpu.session() as bs:
            spec.variants["dsl"](_RecordingJitExec(bs.exec_session(), seen), *tensors, **cfg.attrs)
    if not seen:
        raise CaseSkipped("the dsl variant launched no kernel on shape (7,)")
    try:
        _nvrtc_or_skip()
        targets: tuple[str, ...] = ("cuda", "wgsl")
    except CaseSkipped:
        targets = ("wgsl",)
    for kernel, descs, constants in seen.values():
        types = ", ".join((getattr(d, "dtype", None) and d.dtype.name) or "number" for d in descs)
        for target in targets:
            try:
                compile_only(kernel, target, descs, constants)
            except UnsupportedError:
                continue
            except TenferroError as exc:
                raise CheckFailure(
                    f"DSL kernel {kernel.name!r} of op {spec.name!r} ({types}) does not "
                    f"compile for {target}: {type(exc).__name__}: {exc}"
                ) from exc


def check_raw_launches(spec: OpSpec, cpu: Runtime, cfg: Settings) -> None:
    """Run the ``cuda-raw`` variant on the recording raw session for every declared dtype:
    each launch's argument sizes must match its kernel's PTX ``.entry`` parameters."""
    from .recording import RecordingExecSession

    _nvrtc_or_skip()
    launched = 0
    for dt in [resolve_dtype(n) for n in spec.signature.dtypes]:
        tensors = [cpu.upload(a) for a in random_inputs(spec.signature, (7,), dt)]
        with cpu.session() as bs:
            ex = RecordingExecSession(bs.exec_session(), spec.kernels)
            try:
                spec.variants["cuda-raw"](ex, *tensors, **cfg.attrs)
            except (ArgumentMismatchError, SymbolLookupError) as exc:
                raise CheckFailure(
                    f"op {spec.name!r}, variant 'cuda-raw' ({dt.name}): {exc}"
                ) from exc
            except TenferroError:
                continue  # the variant refused the dtype with a typed error
        launched += sum(len(rs.launches) for rs in ex.raw_sessions)
    if not launched:
        raise CaseSkipped("the cuda-raw variant launched no kernel on shape (7,)")


#: The checks run on each (variant, backend) pair, in order.
BACKEND_CHECKS: dict[str, Callable[..., None]] = {
    "values": check_values,
    "views": check_views,
    "inputs": check_inputs,
    "sessions": check_sessions,
}


# -- listing the cases ---------------------------------------------------------------------------
def claimed_backends(host: Host, spec: OpSpec, kind: str) -> list[str]:
    """The backend kinds variant ``kind`` claims: its native one, or every DSL backend."""
    if kind == "dsl":
        return [k for k in sorted(host.registry.providers) if host.registry.jit_factory(k)]
    return [b for b, v in (("cpu", "cpu"), ("cuda", "cuda-raw")) if v == kind]


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
) -> list[Case]:
    """Every case of op ``name``; ``backends``/``variants`` narrow them, ``compile_only``
    keeps the GPU-less ones; ``rtol``/``atol`` override the op's tolerances and ``attrs`` are
    passed to every call of the op and its reference."""
    spec = host.registry.op(name).spec
    assert spec is not None
    out: list[Case] = []

    def add(
        check: str,
        kind: str,
        backend: str,
        body: Callable[[], None],
        unavailable: str | None = None,
    ) -> None:
        out.append(Case(spec.name, check, kind, backend, body, unavailable))

    cfg = Settings(rtol, atol, dict(attrs or {}))
    chosen = [k for k in spec.variants if variants is None or k in variants]
    if not compile_only:
        for kind in chosen:
            for backend in claimed_backends(host, spec, kind):
                if backends is not None and backend not in backends:
                    continue
                status = host.backend_status(backend)
                reason = None if status.available else f"backend {backend!r}: {status.reason}"

                for check, fn in BACKEND_CHECKS.items():
                    body = partial(fn, host, spec, kind, backend, cfg)
                    add(check, kind, backend, body, reason)
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
    "SHAPES",
    "VIEWS",
    "Case",
    "CaseSkipped",
    "CheckFailure",
    "Outcome",
    "Settings",
    "cases",
    "conformance_test",
    "poison_fresh_memory",
    "run_cases",
    "run_variant",
]

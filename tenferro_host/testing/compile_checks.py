"""The GPU-less conformance checks (backend ``none``): kernels compile, launches fit.

Every declared CUDA ``KernelSource`` compiles with NVRTC for its archs; every DSL kernel the
``dsl`` variant launches on the CPU interpreter (every declared dtype, over the suite's small
shape sets: empty, one, odd, no multiple of a cube side), each config of an autotuned one
with its constants and cube shape (the interpreter runs only one), compiles for CUDA and WGSL
(:func:`tenferro_host.compile_only.compile_only`); every ``cuda-raw`` launch's argument
list matches its kernel's PTX parameters (:mod:`.recording`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import DType
from ..dtypes import dtype as resolve_dtype
from ..errors import ArgumentMismatchError, SymbolLookupError, TenferroError, UnsupportedError
from ..kernel._autotune import Autotuned
from ..kernel._kernel import Kernel
from ..ops import OpSpec
from ..provider._autotuning import frozen_launches
from ..provider._compile_targets import CompileOptions
from ..provider._jit_session import Grid, as_grid
from ..tensor import Tensor
from .backend_checks import reference_refusal, stored_dtypes
from .case import CaseSkipped, CheckFailure, Settings
from .checks import random_arrays
from .suite_shapes import ShapeSet, probe_sets

if TYPE_CHECKING:
    from ..provider._runtime import Runtime


def _nvrtc_or_skip() -> None:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError as exc:
        raise CaseSkipped(
            f"NVRTC is not installed ({exc}); pip install 'tenferro-host[cuda]'"
        ) from exc


def check_kernel_sources(spec: OpSpec) -> None:
    """Every declared CUDA KernelSource compiles with NVRTC for each of its archs."""
    from ..compile_only import compile_source
    from .recording import kernel_text

    cuda = [k for k in spec.kernels if k.language == "cuda"]
    if not cuda:
        raise CaseSkipped("the op declares no CUDA KernelSource")
    _nvrtc_or_skip()
    for k in cuda:
        for arch in k.archs or ("sm_90",):
            try:
                compile_source(kernel_text(k), arch=arch, name=f"{k.name}.cu")
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


def _suite_inputs(
    spec: OpSpec, cpu: Runtime, cfg: Settings, dtypes: Iterable[DType]
) -> Iterator[tuple[DType, ShapeSet, list[Tensor]]]:
    """Each dtype over the small shape sets, uploaded to ``cpu``, where the reference takes it."""
    for dt in dtypes:
        for shape_set in probe_sets(spec, cfg.attrs):
            arrays = random_arrays(shape_set.shapes, dt)
            if reference_refusal(spec, arrays, cfg) is None:
                yield dt, shape_set, [cpu.upload(a) for a in arrays]


def check_dsl_compiles(spec: OpSpec, cpu: Runtime, cfg: Settings) -> None:
    """Each DSL kernel the ``dsl`` variant launches (seen on the CPU interpreter: every
    declared dtype over the small shape sets), every config of an autotuned one, compiles for
    cuda (NVRTC) and WGSL; a typed refusal (of a dtype, a shape or a target) is not a failure."""
    from ..compile_only import compile_only

    seen: dict[Any, tuple[Any, list[Any], dict[str, Any]]] = {}
    for _, _, tensors in _suite_inputs(spec, cpu, cfg, stored_dtypes(spec, cpu)):
        with frozen_launches(), cpu.session() as bs:  # to find the kernels, not to tune them
            ex = _RecordingJitExec(bs.exec_session(), seen)
            try:
                spec.variants["dsl"](ex, *tensors, **cfg.attrs)
            except TenferroError:
                continue  # the variant refused the dtype or shape with a typed error
    if not seen:
        raise CaseSkipped("the dsl variant launched no kernel on the suite's shapes")
    try:
        _nvrtc_or_skip()
        targets: tuple[str, ...] = ("cuda", "wgsl")
    except CaseSkipped:
        targets = ("wgsl",)
    for launched, descs, launch_constants in seen.values():
        types = ", ".join((getattr(d, "dtype", None) and d.dtype.name) or "number" for d in descs)
        for kernel, constants, dim, which in _compilations(launched, launch_constants):
            for target in targets:
                try:
                    compile_only(kernel, target, descs, constants, dim=dim)
                except UnsupportedError:
                    continue
                except TenferroError as exc:
                    raise CheckFailure(
                        f"DSL kernel {kernel.name!r}{which} of op {spec.name!r} ({types}) does "
                        f"not compile for {target}: {type(exc).__name__}: {exc}"
                    ) from exc


def _compilations(
    launched: Any, constants: dict[str, Any]
) -> Iterator[tuple[Kernel, dict[str, Any], Grid, str]]:
    """What a launched kernel compiles as: itself, or each config of an autotuned one (its
    constants, and its cube shape where it has one), with how a failure names it."""
    default = CompileOptions().dim
    if not isinstance(launched, Autotuned):
        yield launched, constants, default, ""
        return
    for config in launched.configs:
        dim = default if config.dim is None else as_grid(config.dim, "dim")
        yield (
            launched.kernel,
            {**constants, **config.constants},
            dim,
            f" (config {config.constants})",
        )


def check_raw_launches(spec: OpSpec, cpu: Runtime, cfg: Settings) -> None:
    """Run the ``cuda-raw`` variant on the recording raw session for every declared dtype
    over the small shape sets: each launch's argument sizes must match its kernel's PTX
    ``.entry`` parameters."""
    from .recording import RecordingExecSession

    if not any(k.language == "cuda" for k in spec.kernels):
        raise CaseSkipped(
            "the op declares no CUDA KernelSource to match launches against (a variant that "
            "calls a vendor library launches none of its own)"
        )
    _nvrtc_or_skip()
    launched = 0
    dtypes = [resolve_dtype(n) for n in spec.signature.dtypes]
    for dt, shape_set, tensors in _suite_inputs(spec, cpu, cfg, dtypes):
        with cpu.session() as bs:
            ex = RecordingExecSession(bs.exec_session(), spec.kernels)
            try:
                spec.variants["cuda-raw"](ex, *tensors, **cfg.attrs)
            except (ArgumentMismatchError, SymbolLookupError) as exc:
                raise CheckFailure(
                    f"op {spec.name!r}, variant 'cuda-raw' ({dt.name}, shape {shape_set}): {exc}"
                ) from exc
            except TenferroError:
                continue  # the variant refused the dtype or shape with a typed error
        launched += sum(len(rs.launches) for rs in ex.raw_sessions)
    if not launched:
        raise CaseSkipped("the cuda-raw variant launched no kernel on the suite's shapes")


__all__ = ["check_dsl_compiles", "check_kernel_sources", "check_raw_launches"]

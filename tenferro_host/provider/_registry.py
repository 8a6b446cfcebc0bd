"""The registry plugins declare into: backend providers, DSL providers, operations.

Each plugin registers through a staging view tied to its distribution; the view commits only
when the plugin's hook returned, so a raising plugin leaves nothing half-registered. A name
registered by two distributions drops both and is listed with status ``conflict``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import PluginError, UnsupportedError, ValidationError
from ..ops import OpSpec
from ._compile_targets import CompileFn, SourceCompileFn

if TYPE_CHECKING:
    from ._exec_session import ExecSession
    from ._host_services import HostServices
    from ._runtime import Runtime
    from ._session import Session


@dataclass
class BackendStatus:
    """What ``caps`` shows for one backend kind."""

    kind: str
    available: bool
    reason: str | None = None
    software: bool = False
    devices: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None


@dataclass(frozen=True)
class BackendProvider:
    """A backend kind: ``probe()`` says whether and where it runs, ``create`` makes runtimes."""

    kind: str
    probe: Callable[[], BackendStatus]
    create: Callable[[HostServices, int], Runtime]
    priority: int = 0  # higher is preferred as the default backend
    #: How ``ex.capture()`` replays here: "replayed" (op calls one by one) or "native" (a
    #: device graph); ``caps`` shows it in each device entry (docs/capture.md).
    capture: str = "replayed"


@dataclass
class OpRecord:
    """A registered op, or a conflict between distributions that registered the same name."""

    name: str
    dist: str
    spec: OpSpec | None
    status: str = "ok"  # "ok" | "conflict"
    conflicting: list[str] = field(default_factory=list)


#: ``factory(exec_session, op)``: the DSL session of one op on one exec session.
JitFactory = Callable[["ExecSession", str], "Session"]


class Registry:
    """All registrations, with the distribution that made each."""

    def __init__(self) -> None:
        self.providers: dict[str, tuple[str, BackendProvider]] = {}
        self.ops: dict[str, OpRecord] = {}
        self._jit: dict[str, tuple[str, JitFactory]] = {}
        self._compile_targets: dict[str, tuple[str, CompileFn]] = {}
        self._source_compilers: dict[str, tuple[str, SourceCompileFn]] = {}
        #: (plugin, why) of every plugin that failed to load: a missing op may be theirs.
        self.load_failures: list[tuple[str, str]] = []

    def staging(self, dist: str) -> RegistrationView:
        """A view that collects what distribution ``dist`` registers, committed all at once."""
        return RegistrationView(self, dist)

    def jit_factory(self, kind: str) -> JitFactory | None:
        """The DSL session factory of backend ``kind``, or None."""
        found = self._jit.get(kind)
        return found[1] if found else None

    def provider(self, kind: str) -> BackendProvider | None:
        """The provider of backend ``kind``, or None."""
        found = self.providers.get(kind)
        return found[1] if found else None

    def compile_target(self, name: str) -> CompileFn:
        """The compile-only DSL target ``name`` (``cuda``, ``wgsl`` ...); ValidationError if no
        plugin registered it."""
        found = self._compile_targets.get(name)
        if found is None:
            known = ", ".join(sorted(self._compile_targets)) or "none"
            raise ValidationError(
                f"target {name!r} is not one of the registered compile targets ({known}); "
                "install the backend plugin that provides it",
                argument="target",
            )
        return found[1]

    def compile_targets(self) -> list[str]:
        """The registered compile-only DSL targets, sorted."""
        return sorted(self._compile_targets)

    def source_compiler(self, language: str) -> SourceCompileFn:
        """The raw source compiler of ``language`` (``cuda``: NVRTC); UnsupportedError if no
        plugin registered one."""
        found = self._source_compilers.get(language)
        if found is None:
            raise UnsupportedError(
                f"no plugin registered a {language!r} source compiler; install the backend "
                "plugin for it (for cuda: pip install 'tenferro-host[cuda]')"
            )
        return found[1]

    def op(self, name: str) -> OpRecord:
        """The record of op ``name``; ValidationError if unknown, PluginError if in conflict."""
        if not isinstance(name, str):
            raise ValidationError(
                f"an op name is a string such as 'ext_add_kernel.add', got {type(name).__name__}",
                argument="name",
            )
        rec = self.ops.get(name)
        if rec is None:
            known = ", ".join(sorted(self.ops)) or "none"
            failed = "; ".join(f"{plugin!r} ({why})" for plugin, why in self.load_failures)
            hint = (
                f"; plugins that failed to load (the op may be theirs): {failed}" if failed else ""
            )
            raise ValidationError(
                f"no op named {name!r}; registered ops: {known}{hint}", argument="name"
            )
        if rec.status == "conflict":
            raise PluginError(
                f"op {name!r} is registered by several distributions "
                f"({', '.join(rec.conflicting)}); uninstall or disable all but one"
            )
        return rec

    def conflicts(self) -> list[OpRecord]:
        """Ops registered by more than one distribution."""
        return [r for r in self.ops.values() if r.status == "conflict"]

    def _commit(self, view: RegistrationView) -> None:
        for kind, _ in view.providers:
            if kind in self.providers:
                raise PluginError(
                    f"backend kind {kind!r} is already provided by {self.providers[kind][0]}"
                )
        for kind, _ in view.jits:
            if kind in self._jit:
                raise PluginError(
                    f"the DSL provider for {kind!r} is already registered by {self._jit[kind][0]}"
                )
        for what, mine, taken in (
            ("compile target", view.compile_targets, self._compile_targets),
            ("source compiler", view.source_compilers, self._source_compilers),
        ):
            for name in mine:
                if name in taken:
                    raise PluginError(
                        f"the {what} {name!r} is already registered by {taken[name][0]}"
                    )
        for kind, provider in view.providers:
            self.providers[kind] = (view.dist, provider)
        for kind, factory in view.jits:
            self._jit[kind] = (view.dist, factory)
        self._compile_targets.update((n, (view.dist, f)) for n, f in view.compile_targets.items())
        self._source_compilers.update((n, (view.dist, f)) for n, f in view.source_compilers.items())
        for spec in view.ops:
            rec = self.ops.get(spec.name)
            if rec is None:
                self.ops[spec.name] = OpRecord(spec.name, view.dist, spec)
            else:  # a new record: a handle made before (and its plans) is not the op's now
                self.ops[spec.name] = OpRecord(
                    spec.name,
                    rec.dist,
                    None,
                    "conflict",
                    sorted({*rec.conflicting, rec.dist, view.dist}),
                )


class RegistrationView:
    """What one plugin's ``tenferro_host_register(registry)`` receives."""

    def __init__(self, registry: Registry, dist: str) -> None:
        self._registry = registry
        self.dist = dist
        self.providers: list[tuple[str, BackendProvider]] = []
        self.jits: list[tuple[str, JitFactory]] = []
        self.ops: list[OpSpec] = []
        self.compile_targets: dict[str, CompileFn] = {}
        self.source_compilers: dict[str, SourceCompileFn] = {}

    def add_backend(self, provider: BackendProvider) -> None:
        """Provide a backend kind (``cuda``, ``webgpu`` ...)."""
        self.providers.append((provider.kind, provider))

    def add_jit(self, kind: str, factory: JitFactory) -> None:
        """Provide the DSL session of a backend kind: ``factory(exec_session, op)``."""
        self.jits.append((kind, factory))

    def add_compile_target(self, name: str, compile: CompileFn) -> None:
        """Provide compile-only DSL target ``name``: ``compile(kernel, descs, constants,
        options)`` returns a :class:`~._compile_targets.CompiledKernel` without a device."""
        self.compile_targets[name] = compile

    def add_source_compiler(self, language: str, compile: SourceCompileFn) -> None:
        """Provide the raw source compiler of ``language``: ``compile(source, arch, name)``."""
        self.source_compilers[language] = compile

    def add_op(self, spec: OpSpec) -> None:
        """Declare an operation."""
        if not isinstance(spec, OpSpec):
            raise ValidationError(
                f"add_op takes an OpSpec, got {type(spec).__name__}", argument="spec"
            )
        self.ops.append(spec)

    def commit(self) -> None:
        """Add this view's registrations; PluginError if a backend or DSL kind is taken."""
        self._registry._commit(self)


__all__ = ["BackendProvider", "BackendStatus", "RegistrationView"]

"""The Host: discovers plugins lazily, owns the backends, runs operations.

>>> import numpy as np, tenferro_host as tf
>>> host = tf.Host()
>>> cpu = host.backend("cpu")
>>> cpu is host.backend("cpu:0")
True
>>> cpu.kind, cpu.name
('cpu', 'cpu:0')
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterable
from typing import Any

from . import _op_handle
from ._loader import (
    PLUGIN_FAILURES,
    PluginSet,
    env_allowed,
    env_disabled,
    env_strict,
    plugin_output_to_stderr,
)
from ._op_handle import OpHandle
from .capability import ExtensionCapability
from .errors import (
    PluginError,
    TenferroError,
    UnsupportedError,
    ValidationError,
)
from .provider import _op_plan
from .provider._compiled import Unplanned, compiled_method
from .provider._exec_session import ExecSession
from .provider._registry import BackendStatus, Registry
from .provider._runtime import Runtime
from .provider._session import BackendSession

#: The built-in CPU backend, loaded by name as an entry point's module is: it reaches the host
#: only through its public fronts, like every plugin, so no host module imports it.
CPU_PLUGIN = "tenferro_host._cpu"
_BACKEND_NAME = re.compile(r"^([a-z][a-z0-9_]*)(?::(\d+))?$")


def parse_backend_name(name: str) -> tuple[str, int]:
    """``kind[:index]`` -> (kind, index); a bare kind means index 0."""
    m = _BACKEND_NAME.match(name) if isinstance(name, str) else None
    if m is None:
        raise ValidationError(
            f"backend name {name!r} does not match 'kind[:index]' (e.g. 'cpu', 'cuda:1')",
            argument="name",
        )
    return m.group(1), int(m.group(2) or 0)


class Host:
    """Plugins, backends and operations of one process (or one test)."""

    def __init__(
        self,
        *,
        strict: bool | None = None,
        disabled: Iterable[str] | None = None,
        plugins: Iterable[str] | None = None,
        builtin_only: bool = False,
    ):
        """``disabled``: plugins (entry-point names) not to load (default
        ``TENFERRO_DISABLE_PLUGINS``); ``plugins``: the only ones to load (default
        ``TENFERRO_PLUGINS``; the host's CPU backend always loads); ``builtin_only``: load no
        plugin of another distribution than tenferro-host."""
        self.strict = env_strict() if strict is None else strict
        self.disabled = env_disabled() if disabled is None else frozenset(disabled)
        if isinstance(plugins, str):
            raise ValidationError(
                f"plugins={plugins!r}: pass a list of plugin names, e.g. plugins=['cuda']",
                argument="plugins",
            )
        self.allowed = env_allowed() if plugins is None else frozenset(plugins)
        self.builtin_only = builtin_only
        self._plugins: PluginSet | None = None
        self._backends: dict[tuple[str, int], Runtime] = {}
        self._statuses: dict[str, BackendStatus] = {}
        self._instances: dict[tuple[str, int], int] = {}  # runtimes made per device
        self._lock = threading.RLock()
        self._handles: dict[str, OpHandle] = {}
        #: Whether a plugin observes sessions (set when plugins load; read on every session).
        self.observes_sessions = False

    # -- plugins -------------------------------------------------------------------------------
    @property
    def plugins(self) -> PluginSet:
        """The loaded plugins (loaded on first use)."""
        with self._lock:
            if self._plugins is None:
                plugins = PluginSet(
                    strict=self.strict,
                    disabled=self.disabled,
                    allowed=self.allowed,
                    builtin_only=self.builtin_only,
                )
                plugins.load([("cpu", importlib.import_module(CPU_PLUGIN))])
                self.observes_sessions = plugins.observe_started or plugins.observe_finished
                self._plugins = plugins
            return self._plugins

    @property
    def registry(self) -> Registry:
        return self.plugins.registry

    # -- the services a runtime uses (provider.HostServices) -------------------------------------
    def provider_capabilities(self, runtime: Runtime) -> dict[Any, bool]:
        return self.plugins.capabilities(runtime)

    def jit_factory(self, kind: str) -> Any:
        return self.registry.jit_factory(kind)

    def session_started(self, session: BackendSession) -> None:
        if self.plugins.observe_started:
            self._observe("tenferro_host_session_started", session=session)

    def session_finished(self, session: BackendSession, error: BaseException | None) -> None:
        if self.plugins.observe_finished:
            self._observe("tenferro_host_session_finished", session=session, error=error)

    def _observe(self, hook: str, **kwargs: Any) -> None:
        try:
            getattr(self.plugins.pm.hook, hook)(**kwargs)
        except PLUGIN_FAILURES as exc:
            raise PluginError(f"a {hook} observer raised {type(exc).__name__}: {exc}") from exc

    # -- backends ------------------------------------------------------------------------------
    def backend_status(self, kind: str) -> BackendStatus:
        """Availability of a backend kind (probed once per Host)."""
        with self._lock:
            if kind not in self._statuses:
                provider = self.registry.provider(kind)
                if provider is None:
                    known = ", ".join(sorted(self.registry.providers)) or "none"
                    return BackendStatus(
                        kind,
                        False,
                        f"no provider plugin for backend kind {kind!r} (installed: {known})",
                    )
                try:
                    with plugin_output_to_stderr():
                        status = provider.probe()
                except PLUGIN_FAILURES as exc:  # a provider's bug leaves its backend unavailable
                    status = BackendStatus(
                        kind,
                        False,
                        f"probing the backend failed: {type(exc).__name__}: {exc}",
                        error=exc,
                    )
                if not isinstance(status, BackendStatus):
                    status = BackendStatus(
                        kind,
                        False,
                        f"the provider's probe() returned {type(status).__name__}, not a "
                        "BackendStatus; fix or uninstall the plugin that provides it",
                    )
                self._statuses[kind] = status
            return self._statuses[kind]

    def backend_statuses(self) -> list[BackendStatus]:
        """Every installed backend kind, in default-preference order."""
        providers = sorted(self.registry.providers.values(), key=lambda p: -p[1].priority)
        return [self.backend_status(p.kind) for _, p in providers]

    def backend_capabilities(self, status: BackendStatus) -> dict[ExtensionCapability, bool]:
        """The capabilities of an available backend kind's first device, for ``caps``.

        They come from the probe cache when the status's devices did (``"probe": "cache"`` in
        each device entry: the driver files are unchanged) and the plugins are the same, so
        ``caps`` creates no runtime then; else from a runtime, and stored for next time.
        """
        from .provider._probe_cache import cached_probe

        def live() -> dict[str, bool]:
            rt = self.backend(f"{status.kind}:0")
            return {c.name: bool(v) for c, v in rt.capabilities().items()}

        devices = status.devices
        cached = bool(devices) and all(
            isinstance(d, dict) and d.get("probe") == "cache" for d in devices
        )
        names, _ = cached_probe(
            f"capabilities-{status.kind}", (), self._probe_facts(status), live, refresh=not cached
        )
        return {c: bool(names.get(c.name, False)) for c in ExtensionCapability}

    def _probe_facts(self, status: BackendStatus) -> Any:
        """What a backend's cached capabilities depend on besides its drivers."""
        live = [{k: v for k, v in d.items() if k != "probe"} for d in status.devices]
        plugins = [(r.name, r.version, r.status) for r in self.plugins.records]
        return [live, plugins]

    def default_backend(self) -> str:
        """The best available backend: highest priority with a hardware device, else CPU."""
        for status in self.backend_statuses():
            if status.available and not status.software:
                return f"{status.kind}:0"
        return "cpu:0"

    def _runtime_for(self, name: str) -> tuple[str, int]:
        kind, index = parse_backend_name(name)
        status = self.backend_status(kind)
        if not status.available:
            known = status.error if isinstance(status.error, UnsupportedError) else None
            raise UnsupportedError(  # a fresh error each time: the stored one keeps its traceback
                f"backend {kind!r} is unavailable: {status.reason}",
                backend=kind,
                feature=known.feature if known is not None else "backend",
                reason=status.reason,
            ) from status.error
        if index >= len(status.devices):
            raise ValidationError(
                f"backend {kind!r} has {len(status.devices)} device(s); "
                f"use an index below {len(status.devices)}",
                argument="name",
            )
        return kind, index

    def backend(self, name: str) -> Runtime:
        """The runtime for ``kind[:index]``, created once per Host and memoized."""
        key = self._runtime_for(name)
        with self._lock:
            rt = self._backends.get(key)
            if rt is None:
                rt = self._create(*key)
                self._backends[key] = rt
            return rt

    def new_backend(self, name: str) -> Runtime:
        """An additional runtime on the same device: own stream, own allocation domain; its
        name tells it apart (``cpu:0#2``, ``cpu:0#3`` ...)."""
        key = self._runtime_for(name)
        runtime = self._create(*key)
        with self._lock:
            runtime.instance = self._instances[key] = self._instances.get(key, 1) + 1
        return runtime

    def _create(self, kind: str, index: int) -> Runtime:
        provider = self.registry.provider(kind)
        assert provider is not None
        try:
            with plugin_output_to_stderr():
                runtime = provider.create(self, index)
        except TenferroError:
            raise
        except PLUGIN_FAILURES as exc:  # a provider's bug, not the caller's: name the plugin
            raise PluginError(
                f"the provider of backend {kind!r} failed to create {kind}:{index}: "
                f"{type(exc).__name__}: {exc}; fix or uninstall the plugin that provides it"
            ) from exc
        if not isinstance(runtime, Runtime):
            raise PluginError(
                f"the provider of backend {kind!r} returned {type(runtime).__name__} from "
                "create(), not a Runtime; fix or uninstall the plugin that provides it"
            )
        return runtime

    # -- operations ----------------------------------------------------------------------------
    def op(self, name: str) -> OpHandle:
        """The op ``name`` resolved once (registry entry, signature, variant per runtime kind).

        Calling the handle is ``host.run(name, ...)``; the handle is cached per Host and
        replaced when a later registration replaces the op.
        """
        handle = self._handles.get(name) if isinstance(name, str) else None
        registry = (self._plugins or self.plugins).registry
        if handle is not None and registry.ops.get(name) is handle.record:
            return handle
        if not isinstance(name, str):
            raise ValidationError(
                f"an op name is a string such as 'ext_add_kernel.add', got {type(name).__name__} "
                f"{name!r}",
                argument="name",
            )
        handle = self._handles[name] = OpHandle(self, registry.op(name))
        return handle

    def run(self, name: str, *tensors: Any, backend: str | None = None, **attrs: Any) -> Any:
        """Run op ``name`` on the backend its tensors live on, inside a fresh session."""
        try:
            handle = self._handles[name]
        except (KeyError, TypeError):  # not resolved yet, or not a name: op() says which
            handle = self.op(name)
        else:
            if handle._ops.get(name) is not handle.record:  # replaced by a later registration
                handle = self.op(name)
        call = _op_handle.CALL  # the compiled call: a planned key replays from here, in C
        if call is not None and backend is None and tensors and _op_plan.ENABLED:
            result = call(handle._plans, tensors, attrs)
            if type(result) is not Unplanned:
                return result
        if backend is None:  # no keyword to merge into the call's
            return handle(*tensors, **attrs)
        return handle(*tensors, backend=backend, **attrs)

    def run_in_session(
        self, ex: ExecSession, name: str, tensors: tuple[Any, ...], attrs: dict[str, Any]
    ) -> Any:
        """Run op ``name`` inside the exec session ``ex`` (no new session)."""
        return self.op(name).run_in(ex, tensors, attrs)

    def variants_by_backend(self, name: str) -> dict[str, str]:
        """Which variant kind runs on each installed backend kind, for ``caps``/``ops``."""
        spec = self.registry.ops[name].spec
        if spec is None:
            return {}
        out = {}
        for kind in sorted(self.registry.providers):
            chosen = spec.variant_kind_for(kind, self.registry.jit_factory(kind) is not None)
            if chosen:
                out[kind] = chosen
        return out


compiled_method(Host, "run")

__all__ = ["Host", "parse_backend_name"]

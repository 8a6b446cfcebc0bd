"""Plugin discovery and isolation on pluggy (SPEC section 11).

The host iterates the entry points of the group ``tenferro_host`` itself and loads, registers
and validates each inside its own try/except: an import failure, a raising hook, an unknown
hook or hook argument, or an incompatible ``TENFERRO_HOST_API`` is recorded (plugin,
distribution, version, error) and skipped — unless strict mode makes it fatal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError
from .registry import Registry

#: The plugin API this host implements: a plugin's major must match, its minor be <= ours.
HOST_API = (1, 0)
ENTRY_POINT_GROUP = "tenferro_host"


@dataclass
class PluginRecord:
    """One plugin as ``caps`` lists it."""

    name: str
    dist: str
    version: str
    status: str  # "loaded" | "error" | "disabled"
    error: str | None = None


def env_strict() -> bool:
    return os.environ.get("TENFERRO_STRICT_PLUGINS", "") not in ("", "0")


def env_disabled() -> frozenset[str]:
    raw = os.environ.get("TENFERRO_DISABLE_PLUGINS", "")
    return frozenset(n.strip() for n in raw.split(",") if n.strip())


def _check_api(plugin: Any) -> None:
    api = getattr(plugin, "TENFERRO_HOST_API", None)
    if api is None:
        return
    if (
        not isinstance(api, tuple)
        or len(api) != 2
        or not all(isinstance(v, int) for v in api)
        or api[0] != HOST_API[0]
        or api[1] > HOST_API[1]
    ):
        raise PluginError(
            f"plugin needs TENFERRO_HOST_API {api!r} but this host implements {HOST_API}; "
            "install a plugin version built for this host"
        )


class PluginSet:
    """The loaded plugins of one Host: pluggy manager, registry and records."""

    def __init__(self, *, strict: bool, disabled: frozenset[str]) -> None:
        self.strict = strict
        self.disabled = disabled
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.registry = Registry()
        self.records: list[PluginRecord] = []

    def load(self, builtins: list[tuple[str, Any]]) -> None:
        """Register the built-in plugins, then every entry point; then resolve conflicts."""
        own = metadata.version("tenferro-host") if _has_dist("tenferro-host") else "0"
        for name, module in builtins:
            self._add(name, "tenferro-host", own, lambda m=module: m)
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "unknown"
            version = ep.dist.version if ep.dist is not None else "unknown"
            if ep.name in self.disabled:
                self.records.append(PluginRecord(ep.name, dist, version, "disabled"))
                continue
            self._add(ep.name, dist, version, ep.load)
        self.observe_started = bool(self.pm.hook.tenferro_host_session_started.get_hookimpls())
        self.observe_finished = bool(self.pm.hook.tenferro_host_session_finished.get_hookimpls())
        conflicts = self.registry.conflicts()
        if conflicts and self.strict:
            raise PluginError(
                "op name conflicts: "
                + "; ".join(f"{c.name} ({', '.join(c.conflicting)})" for c in conflicts)
            )

    def _add(self, name: str, dist: str, version: str, load: Any) -> None:
        plugin = None
        try:
            plugin = load()
            _check_api(plugin)
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
            view = self.registry.staging(dist)
            for impl in self.pm.hook.tenferro_host_register.get_hookimpls():
                if impl.plugin is plugin:
                    impl.function(registry=view)
            view.commit()
        except (Exception, SystemExit) as exc:  # isolation: a plugin failure is recorded
            if plugin is not None and self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            message = describe_failure(exc)
            self.records.append(PluginRecord(name, dist, version, "error", message))
            self.registry.load_failures.append((name, f"{dist} {version}: {message}"))
            if self.strict:
                raise PluginError(
                    f"plugin {name!r} ({dist} {version}) failed: {message}; "
                    "fix or uninstall it, or disable it with TENFERRO_DISABLE_PLUGINS"
                ) from exc
            return
        self.records.append(PluginRecord(name, dist, version, "loaded"))


def describe_failure(exc: BaseException) -> str:
    """One line about a plugin failure; a SyntaxError names its file by full path.

    >>> describe_failure(SyntaxError("invalid syntax", ("/src/pkg/plugin.py", 3, 1, "x y")))
    'SyntaxError: invalid syntax (/src/pkg/plugin.py, line 3)'
    """
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{type(exc).__name__}: {exc.msg} ({exc.filename}, line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"


def _has_dist(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


__all__ = ["ENTRY_POINT_GROUP", "HOST_API", "PluginRecord", "PluginSet"]

"""Plugin discovery and isolation on pluggy (docs/contract.md).

The host iterates the entry points of the group ``tenferro_host`` itself and loads, registers
and validates each inside its own try/except: an import failure, a raising hook, an unknown
hook or hook argument, or an incompatible ``TENFERRO_HOST_API`` is recorded (plugin,
distribution, version, error) and skipped — unless strict mode makes it fatal.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from .capability import ExtensionCapability
from .errors import PluginError, ValidationError
from .provider import SPI_VERSION
from .provider import _hookspecs as hookspecs
from .provider._registry import Registry

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


#: What plugin code may raise that the host records instead of passing on: every Exception, and
#: SystemExit (a plugin calling sys.exit() must not end the program that loaded it). Ctrl-C
#: (KeyboardInterrupt) still goes through.
PLUGIN_FAILURES = (Exception, SystemExit)

_STRICT_OFF = frozenset({"", "0", "false", "no", "off"})
_STRICT_ON = frozenset({"1", "true", "yes", "on"})


def env_strict() -> bool:
    """``TENFERRO_STRICT_PLUGINS`` read as a boolean (1/true/yes/on, 0/false/no/off or empty)."""
    raw = os.environ.get("TENFERRO_STRICT_PLUGINS", "")
    value = raw.strip().lower()
    if value in _STRICT_OFF:
        return False
    if value in _STRICT_ON:
        return True
    raise ValidationError(
        f"TENFERRO_STRICT_PLUGINS={raw!r} is not a boolean; set it to 1/true/yes/on for strict "
        "plugin loading, or 0/false/no/off (or leave it unset) for the default",
        argument="TENFERRO_STRICT_PLUGINS",
    )


def env_disabled() -> frozenset[str]:
    raw = os.environ.get("TENFERRO_DISABLE_PLUGINS", "")
    return frozenset(n.strip() for n in raw.split(",") if n.strip())


@contextlib.contextmanager
def plugin_output_to_stderr() -> Iterator[None]:
    """Run plugin code with ``print`` going to stderr: stdout carries only the host's output."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _check_versions(plugin: Any) -> None:
    """Refuse a plugin built for another host API or provider SPI (major differs, or it needs a
    newer minor); a plugin that declares neither is taken as written for this one."""
    for attribute, have, what in (
        ("TENFERRO_HOST_API", HOST_API, "host API"),
        ("TENFERRO_HOST_SPI", SPI_VERSION, "provider SPI"),
    ):
        want = getattr(plugin, attribute, None)
        if want is None:
            continue
        if (
            not isinstance(want, tuple)
            or len(want) != 2
            or not all(isinstance(v, int) for v in want)
            or want[0] != have[0]
            or want[1] > have[1]
        ):
            raise PluginError(
                f"plugin needs {attribute} {want!r} but this host implements the {what} "
                f"{have}; install a plugin version built for this host"
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
        self._backend_plugins: dict[str, tuple[str, Any]] = {}  # kind -> (name, plugin)

    def load(self, builtins: list[tuple[str, Any]]) -> None:
        """Register the built-in plugins, then every entry point; then resolve conflicts."""
        with plugin_output_to_stderr():
            self._load(builtins)

    def _load(self, builtins: list[tuple[str, Any]]) -> None:
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
            _check_versions(plugin)
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
            view = self.registry.staging(dist)
            for impl in self.pm.hook.tenferro_host_register.get_hookimpls():
                if impl.plugin is plugin:
                    impl.function(registry=view)
            view.commit()
        except PLUGIN_FAILURES as exc:  # isolation: any plugin failure is recorded, not raised
            if plugin is not None and self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            message = describe_failure(exc)
            self.records.append(PluginRecord(name, dist, version, "error"))
            self.registry.load_failures.append((name, f"{dist} {version}: {message}"))
            self._fail(self.records[-1], message, exc)
            return
        for kind, _ in view.providers:
            self._backend_plugins[kind] = (name, plugin)
        self.records.append(PluginRecord(name, dist, version, "loaded"))

    def _fail(self, record: PluginRecord, message: str, exc: BaseException) -> None:
        """Mark ``record`` failed; fatal in strict mode."""
        record.status, record.error = "error", message
        if self.strict:
            raise PluginError(
                f"plugin {record.name!r} ({record.dist} {record.version}) failed: {message}; "
                "fix or uninstall it, or disable it with TENFERRO_DISABLE_PLUGINS"
            ) from exc

    def capabilities(self, runtime: Any) -> dict[ExtensionCapability, bool]:
        """The answer of the plugin that provides ``runtime``'s kind, and of no other plugin.

        A raising hook or a malformed answer is recorded on that plugin like a load failure
        (fatal in strict mode) and leaves every capability False.
        """
        name, plugin = self._backend_plugins.get(runtime.kind, (None, None))
        for impl in self.pm.hook.tenferro_host_capabilities.get_hookimpls():
            if plugin is None or impl.plugin is not plugin:
                continue
            try:
                with plugin_output_to_stderr():
                    answer = impl.function(backend=runtime)
                if answer is None:
                    continue
                if not isinstance(answer, dict) or not all(
                    isinstance(k, ExtensionCapability) and isinstance(v, bool)
                    for k, v in answer.items()
                ):
                    raise PluginError(
                        f"tenferro_host_capabilities returned {answer!r}; it must return None or "
                        "a dict of ExtensionCapability to bool"
                    )
            except PLUGIN_FAILURES as exc:
                record = next(r for r in self.records if r.name == name)
                self._fail(
                    record, f"tenferro_host_capabilities raised {type(exc).__name__}: {exc}", exc
                )
                return {}
            return answer
        return {}


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


__all__ = ["ENTRY_POINT_GROUP", "HOST_API", "PLUGIN_FAILURES", "PluginRecord", "PluginSet"]

"""Plugin discovery and isolation on pluggy (docs/contract.md).

The host iterates the entry points of the group ``tenferro_host`` itself and loads, registers
and validates each inside its own try/except: an import failure, a raising hook, an unknown
hook or hook argument, or an incompatible ``TENFERRO_HOST_API`` is recorded (plugin,
distribution, version, error) and skipped — unless strict mode makes it fatal.

Which plugins load is the user's to narrow, before any plugin code runs: by name
(``TENFERRO_DISABLE_PLUGINS``, or only those of ``TENFERRO_PLUGINS``) or by origin (only this
distribution's own: ``builtin_only``). :func:`plugin_source` says where a plugin's code comes
from without importing it.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from ._env import env_switch
from .capability import ExtensionCapability
from .errors import PluginError, ValidationError
from .provider import SPI_VERSION
from .provider import _hookspecs as hookspecs
from .provider._registry import Registry

#: The plugin API this host implements: a plugin's major must match, its minor be <= ours.
HOST_API = (1, 0)
ENTRY_POINT_GROUP = "tenferro_host"
#: The distribution of the host and its own plugins (what ``builtin_only`` keeps).
OWN_DIST = "tenferro-host"


@dataclass
class PluginRecord:
    """One plugin as ``caps`` lists it."""

    name: str
    dist: str
    version: str
    status: str  # "loaded" | "error" | "disabled"
    error: str | None = None
    #: The module the entry point names (where its code is: :func:`plugin_source`).
    module: str | None = None
    #: Why a disabled plugin was not loaded.
    reason: str | None = None


#: What plugin code may raise that the host records instead of passing on: every Exception, and
#: SystemExit (a plugin calling sys.exit() must not end the program that loaded it). Ctrl-C
#: (KeyboardInterrupt) still goes through.
PLUGIN_FAILURES = (Exception, SystemExit)

_STRICT_OFF = frozenset({"", "0", "false", "no", "off"})
_STRICT_ON = frozenset({"1", "true", "yes", "on"})


def env_strict() -> bool:
    """``TENFERRO_STRICT_PLUGINS`` read as a boolean (1/true/yes/on, 0/false/no/off or empty)."""
    return env_switch(
        "TENFERRO_STRICT_PLUGINS",
        _STRICT_ON,
        _STRICT_OFF,
        "is not a boolean; set it to 1/true/yes/on for strict plugin loading, or 0/false/no/off "
        "(or leave it unset) for the default",
    )


def _names(variable: str) -> frozenset[str]:
    return frozenset(n.strip() for n in os.environ.get(variable, "").split(",") if n.strip())


def env_disabled() -> frozenset[str]:
    """``TENFERRO_DISABLE_PLUGINS=a,b``: the plugins not to load."""
    return _names("TENFERRO_DISABLE_PLUGINS")


def env_allowed() -> frozenset[str] | None:
    """``TENFERRO_PLUGINS=a,b``: the only plugins to load (besides the host's CPU backend);
    None when unset or empty (every installed plugin)."""
    return _names("TENFERRO_PLUGINS") or None


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

    def __init__(
        self,
        *,
        strict: bool,
        disabled: frozenset[str],
        allowed: frozenset[str] | None = None,
        builtin_only: bool = False,
    ) -> None:
        self.strict = strict
        self.disabled = disabled
        self.allowed = allowed
        self.builtin_only = builtin_only
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
        own = metadata.version(OWN_DIST) if _has_dist(OWN_DIST) else "0"
        points = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        self._check_allowed({name for name, _ in builtins} | {ep.name for ep in points})
        for name, module in builtins:
            self._add(name, OWN_DIST, own, lambda m=module: m, module.__name__)
        for ep in points:
            dist = ep.dist.name if ep.dist is not None else "unknown"
            version = ep.dist.version if ep.dist is not None else "unknown"
            reason = self._not_selected(ep.name, dist)
            if reason is not None:
                self.records.append(
                    PluginRecord(
                        ep.name, dist, version, "disabled", module=ep.module, reason=reason
                    )
                )
                continue
            self._add(ep.name, dist, version, ep.load, ep.module)
        self.observe_started = bool(self.pm.hook.tenferro_host_session_started.get_hookimpls())
        self.observe_finished = bool(self.pm.hook.tenferro_host_session_finished.get_hookimpls())
        conflicts = self.registry.conflicts()
        if conflicts and self.strict:
            raise PluginError(
                "op name conflicts: "
                + "; ".join(f"{c.name} ({', '.join(c.conflicting)})" for c in conflicts)
            )

    def _check_allowed(self, installed: set[str]) -> None:
        """An allow-list name no installed plugin has is a typo, not a wish for nothing."""
        unknown = sorted((self.allowed or frozenset()) - installed)
        if unknown:
            raise ValidationError(
                f"TENFERRO_PLUGINS (or Host(plugins=...)) names {', '.join(unknown)}, which no "
                f"installed plugin is called; installed: {', '.join(sorted(installed))}",
                argument="TENFERRO_PLUGINS",
            )

    def _not_selected(self, name: str, dist: str) -> str | None:
        """Why the entry point ``name`` of ``dist`` is not to be loaded; None to load it."""
        if name in self.disabled:
            return "in the block-list (TENFERRO_DISABLE_PLUGINS)"
        if self.allowed is not None and name not in self.allowed:
            return "not in the allow-list (TENFERRO_PLUGINS)"
        if self.builtin_only and dist != OWN_DIST:
            return "third-party (--builtin-only)"
        return None

    def _add(self, name: str, dist: str, version: str, load: Any, module: str) -> None:
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
            self.records.append(PluginRecord(name, dist, version, "error", module=module))
            self.registry.load_failures.append((name, f"{dist} {version}: {message}"))
            self._fail(self.records[-1], message, exc)
            return
        for kind, _ in view.providers:
            self._backend_plugins[kind] = (name, plugin)
        self.records.append(PluginRecord(name, dist, version, "loaded", module=module))

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


def plugin_source(record: PluginRecord) -> dict[str, str | None]:
    """Where a plugin's code comes from, found without importing it: ``file`` (its module's
    file), ``install`` (``editable``, ``installed`` or ``unknown``, from PEP 610's
    ``direct_url.json``) and ``url`` (the directory or archive it was installed from, if pip
    recorded one)."""
    install, url = "unknown", None
    with contextlib.suppress(metadata.PackageNotFoundError, ValueError):
        text = metadata.distribution(record.dist).read_text("direct_url.json")
        found = json.loads(text) if text else {}
        dir_info = found.get("dir_info") if isinstance(found, dict) else None
        editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
        install = "editable" if editable else "installed"
        url = found.get("url") if isinstance(found, dict) else None
    return {
        "file": module_file(record.module) if record.module else None,
        "install": install,
        "url": url,
    }


def module_file(module: str) -> str | None:
    """The file of ``module`` (``pkg.sub``): the loaded module's, else found the way an import
    would find it, without running any of it (a package's ``__init__`` neither)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(loaded, "__file__", None)
    head, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(head)  # a top-level name: nothing is imported
        for part in rest:
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = importlib.machinery.PathFinder.find_spec(part, spec.submodule_search_locations)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return spec.origin or next(iter(spec.submodule_search_locations or ()), None)


def _has_dist(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


__all__ = [
    "ENTRY_POINT_GROUP",
    "HOST_API",
    "OWN_DIST",
    "PLUGIN_FAILURES",
    "PluginRecord",
    "PluginSet",
    "module_file",
    "plugin_source",
]

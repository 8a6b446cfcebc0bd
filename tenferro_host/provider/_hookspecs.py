"""Hook specifications (pluggy) for tenferro-host plugins.

A plugin is a plain module named by an entry point in the group ``tenferro_host``; it marks
its hook functions with :data:`hookimpl`. The launch hot path never calls a hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ..capability import ExtensionCapability
    from ._registry import RegistrationView
    from ._runtime import Runtime
    from ._session import BackendSession

PROJECT = "tenferro_host"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def tenferro_host_register(registry: RegistrationView) -> None:
    """Declare backend providers, DSL (JIT) providers and operations on ``registry``."""


@hookspec(firstresult=True)
def tenferro_host_capabilities(
    backend: Runtime,
) -> dict[ExtensionCapability, bool] | None:
    """The extension capabilities of ``backend``; answered by its own provider, others None."""


@hookspec
def tenferro_host_session_started(session: BackendSession) -> None:
    """Observer: a backend session was entered (called only if some plugin implements it)."""


@hookspec
def tenferro_host_session_finished(session: BackendSession, error: BaseException | None) -> None:
    """Observer: a backend session ended, with the body's exception if any."""


__all__ = ["hookimpl"]

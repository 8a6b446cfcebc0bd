"""What the provider layer needs from the host: a narrow protocol instead of the ``Host``.

A runtime, its sessions and its exec sessions call up into the host for exactly these five
things — capabilities answered by the backend's own provider plugin, the DSL factory of a
backend kind, the session observers, and running another op inside an open exec session. The
:class:`~tenferro_host.Host` implements it; a provider never reaches past it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..capability import ExtensionCapability
    from ._exec_session import ExecSession
    from ._runtime import Runtime
    from ._session import BackendSession


class HostServices(Protocol):
    """The host services a runtime uses (the ``Host`` is one)."""

    #: Whether any plugin observes session starts or ends (read on every session: a plain
    #: attribute, so a session pays nothing when nobody observes).
    observes_sessions: bool

    def provider_capabilities(self, runtime: Runtime) -> dict[ExtensionCapability, bool]:
        """What the provider of ``runtime``'s kind says it offers."""
        ...

    def jit_factory(self, kind: str) -> Callable[..., Any] | None:
        """The DSL (JIT) session factory registered for backend ``kind``, if any."""
        ...

    def session_started(self, session: BackendSession) -> None:
        """Tell the session observers a backend session began."""
        ...

    def session_finished(self, session: BackendSession, error: BaseException | None) -> None:
        """Tell the session observers a backend session ended (``error``: why, if it failed)."""
        ...

    def run_in_session(
        self, ex: ExecSession, name: str, tensors: tuple[Any, ...], attrs: dict[str, Any]
    ) -> Any:
        """Run the registered op ``name`` inside the open exec session ``ex``."""
        ...


__all__ = ["HostServices"]

"""The exec session: a backend session's execution authority, the only creator of sub-sessions
(outputs, a DSL session, a capture). Its own module so that it can build a
:class:`~._capture.Capture` (itself a session) without the session base importing the capture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..capability import ExtensionCapability
from ..errors import UnsupportedError, ValidationError
from ._capture import Capture
from ._session import _UNRESOLVED, BackendSession, Session, _get_ident

if TYPE_CHECKING:
    from ..identity import AllocationDomainId, RuntimeIdentity


class ExecSession(Session):
    """The execution authority of one backend session: the only creator of sub-sessions."""

    kind_name = "exec session"

    def __init__(self, backend_session: BackendSession) -> None:
        super().__init__(backend_session.runtime, parent=backend_session)

    @property
    def kind(self) -> str:
        """The backend kind of the runtime (``cpu``, ``cuda`` ...)."""
        return self.runtime.kind

    def supports(self, capability: ExtensionCapability) -> bool:
        """Plausibly available on this backend; never a promise that a launch will succeed."""
        self._check()
        return bool(self.runtime.capabilities().get(capability, False))

    @property
    def device_info(self) -> Any:
        """The device of the runtime."""
        return self.runtime.device_info

    @property
    def runtime_identity(self) -> RuntimeIdentity:
        """The identity of the runtime."""
        return self.runtime.identity

    @property
    def allocation_domain(self) -> AllocationDomainId:
        """The allocator that owns the runtime's buffers."""
        return self.runtime.domain

    def synchronize(self) -> None:
        """Wait until all work submitted on this runtime has finished (a counted host wait)."""
        self._check()
        self.runtime.synchronize()

    def _lacks(
        self, what: str, feature: ExtensionCapability, op: str | None = None
    ) -> UnsupportedError:
        """The refusal of a feature this backend does not have: "backend X has no <what>"."""
        name = self.runtime.name
        return UnsupportedError(
            f"backend {name!r} has no {what}", backend=name, feature=feature.name, op=op
        )

    def raw(self, op: str) -> Any:
        """A raw native-module session; only CUDA offers one."""
        self._check()
        raise self._lacks(
            "raw native-module session; write the kernel in the DSL (ex.jit) to run it here",
            ExtensionCapability.NATIVE_MODULE,
            op,
        )

    def jit(self, op: str) -> Any:
        """A DSL session whose ``launch`` runs one kernel object identically on every backend."""
        if self._owner != _get_ident():
            raise self._refusal()
        runtime = self.runtime
        if runtime.active_capture is not None:
            runtime.active_capture.require_op_call("a DSL session (ex.jit)", op)
        factory = runtime._jit_factory
        if factory is _UNRESOLVED:  # the registry is fixed once plugins loaded: ask once
            factory = runtime._jit_factory = runtime.host.jit_factory(runtime.kind)
        if factory is None:
            raise self._lacks(
                "DSL (JIT_KERNEL) provider installed; install its provider plugin or run on "
                "another backend",
                ExtensionCapability.JIT_KERNEL,
                op,
            )
        return factory(self, op)

    def run(self, op: str, *tensors: Any, **attrs: Any) -> Any:
        """Run another registered op inside this session (no new backend session)."""
        self._check()
        capture = self.runtime.active_capture
        if capture is not None:  # recorded (docs/capture.md)
            return capture.run(self, op, tensors, attrs)
        return self.runtime.host.run_in_session(self, op, tensors, attrs)

    def capture(self) -> Capture:
        """``with ex.capture() as cap:`` records this session's op calls for replay
        (:class:`~tenferro_host.provider.Capture`, docs/capture.md)."""
        self._check()
        return Capture(self)

    def wait_external(self, stream: Any) -> None:
        """Order this runtime's stream after a foreign stream (``__cuda_stream__``)."""
        self._check()
        raise self._lacks("foreign streams to order against", ExtensionCapability.RAW_STREAM)

    def signal_external(self, stream: Any) -> None:
        """Order a foreign stream (``__cuda_stream__``) after this runtime's stream."""
        self.wait_external(stream)


def exec_session_of(session: Any, kind: str) -> ExecSession | None:
    """The exec session of ``session`` if its backend is of ``kind``, else None."""
    if not isinstance(session, BackendSession):
        raise ValidationError(
            f"expected a backend session (from backend.session()), got {type(session).__name__}",
            argument="session",
        )
    ex = session.exec_session()
    return ex if ex.kind == kind else None


def exec_session_for(kind: str) -> Callable[[Any], ExecSession | None]:
    """A backend facade's ``exec_session(session)`` (``tf.cuda.exec_session`` ...)."""

    def exec_session(session: Any) -> ExecSession | None:
        return exec_session_of(session, kind)

    exec_session.__doc__ = f"The {kind} exec session of a backend session, or None if it is not."
    return exec_session


__all__ = ["ExecSession", "exec_session_of"]

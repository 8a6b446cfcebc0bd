"""CuPy on the raw session's stream: the only way the CUDA variants reach cuBLAS and cuSOLVER.

CuPy is optional (``pip install cupy-cuda13x``). Inside a raw session the runtime's stream is
wrapped once per runtime with ``cupy.cuda.Stream.from_external`` (cached with ``rs.resource``; the
cache lives and dies with the runtime that owns the stream) and made CuPy's current stream
for the call, so every CuPy kernel, cuBLAS and cuSOLVER call is enqueued on the session's
stream — never on CuPy's default stream — and ordered with the host's own launches, copies
and frees without a synchronization. CuPy's cuBLAS/cuSOLVER wrappers bind their handle to
the current stream on every call; the handles are CuPy's own, one per thread and device, so
two threads' sessions never share one. Tensors are handed to CuPy as views of their memory
through the borrowed refs' ``__cuda_array_interface__`` (no copy, no stream field, so CuPy
does not synchronize); CuPy's own temporaries come from its pool on the same stream.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

from tenferro_host import Requirement, UnsupportedError
from tenferro_host.provider import refuse_in_device_graph

INSTALL_HINT = "install it with `pip install cupy-cuda13x` (CuPy for CUDA 13)"


@cache
def cupy_missing_reason() -> str | None:
    """None when CuPy imports, else why not (what ``UnsupportedError.reason`` carries)."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a CuPy built for another CUDA
        return f"CuPy is not importable ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
    return None


def cupy_requirement_unmet() -> str | None:
    """The cuda variants' requirement check for ``caps``/``ops`` and the host's run.

    When CuPy is not installed at all it says so without importing anything
    (``importlib.util.find_spec``); when it is, it imports it once (cached) to catch a CuPy
    built for another CUDA.
    """
    if sys.modules.get("cupy") is not None:  # already imported (or stood in for by a test)
        return cupy_missing_reason()
    try:
        installed = importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # sys.modules["cupy"] is None (hidden), or broken
        installed = False
    if not installed:
        return f"CuPy is not installed; {INSTALL_HINT}"
    return cupy_missing_reason()


#: The requirement every ``cuda-raw`` variant of the package declares (feature ``cupy``).
CUPY = Requirement(feature="cupy", unmet=lambda: cupy_requirement_unmet())


def require_cupy(op: str, backend: str) -> Any:
    """The ``cupy`` module, or UnsupportedError (feature ``cupy``) saying how to install it."""
    reason = cupy_missing_reason()
    if reason is not None:
        raise UnsupportedError(
            f"{op} on {backend} runs cuBLAS/cuSOLVER through CuPy: {reason}",
            backend=backend,
            feature="cupy",
            reason=reason,
            op=op,
        )
    import cupy

    return cupy


class StreamHandle:
    """A raw ``CUstream`` handle offered through the CUDA stream protocol (``__cuda_stream__``),
    which ``cupy.cuda.Stream.from_external`` reads."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


class SessionStream:
    """CuPy's handles on one runtime: its device and its stream, wrapped with
    ``cupy.cuda.Stream.from_external`` (CuPy 14 deprecates ``ExternalStream``; CuPy 13,
    which lacks ``from_external``, still gets ``ExternalStream``)."""

    def __init__(self, cupy: Any, device_id: int, stream_handle: int) -> None:
        self.device = cupy.cuda.Device(device_id)
        from_external = getattr(cupy.cuda.Stream, "from_external", None)
        if from_external is None:
            self.stream = cupy.cuda.ExternalStream(stream_handle, device_id)
        else:
            with self.device:
                self.stream = from_external(StreamHandle(stream_handle))


@contextlib.contextmanager
def on_session_stream(rs: Any) -> Iterator[Any]:
    """Within the raw session ``rs``: CuPy with the session's device and stream current.

    Refused while the runtime records a native CUDA graph: CuPy refuses cuBLAS and cuSOLVER
    calls during a stream capture, and a temporary from its memory pool would be baked into the
    graph at an address the pool hands out again (the replayed form runs the call as made)."""
    refuse_in_device_graph(
        rs.runtime,
        f"CuPy work on the session stream ({rs.op}: cuBLAS, cuSOLVER, CuPy's memory pool)",
        "capture in the replayed form (TENFERRO_CUDA_GRAPHS=replayed), which replays the op's "
        "own call, or make this call before the capture and pass its result in",
        rs.op,
    )
    cupy = require_cupy(rs.op, rs.runtime.name)
    handle = rs.stream.native_handle_unsafe()
    ordinal = rs.runtime.device_info.ordinal.ordinal
    bridge: SessionStream = rs.resource(
        ("tenferro_host_linalg", "cupy-stream"), lambda: SessionStream(cupy, ordinal, handle)
    )
    with bridge.device, bridge.stream:
        yield cupy


def as_cupy(cupy: Any, ref: Any) -> Any:
    """A CuPy array over a borrowed ref's memory (its view layout; valid inside the session)."""
    return cupy.asarray(ref)


__all__ = [
    "CUPY",
    "INSTALL_HINT",
    "SessionStream",
    "StreamHandle",
    "as_cupy",
    "cupy_missing_reason",
    "cupy_requirement_unmet",
    "on_session_stream",
    "require_cupy",
]

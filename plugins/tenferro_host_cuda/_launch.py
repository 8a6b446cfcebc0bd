"""The fault rules of every CUDA launch (a raw session's, a prepared one's, the host's own gather).

A launch cuda.core refuses becomes a typed error naming the kernel, the plugin and the op; a
sticky fault in its text poisons the device's primary context for every runtime of the process;
in debug mode (``TENFERRO_DEBUG_SYNC=1``) each launch is waited for so the fault is attributed
to the kernel that caused it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenferro_host import LaunchError

from ._driver import STICKY_FAULT_NAMES, STICKY_FAULTS, error_name, failure, poison

if TYPE_CHECKING:
    from ._args import LaunchConfig
    from ._module import Function
    from ._runtime import CudaRuntime

_STICKY_CODE = 719  # CUDA_ERROR_LAUNCH_FAILED: stands for any sticky fault named in the text

#: ``cuda.core.launch`` once imported (a test's stand-in replaces it here).
launch_fn: Callable[..., Any] | None = None
#: ``cuda.core.Stream.from_handle`` once imported (a test's stand-in replaces it here).
stream_fn: Callable[[int], Any] | None = None


def core_launch() -> Callable[..., Any]:
    """``cuda.core.launch``, imported once (a ``from`` import of a package costs calls; cuda.core
    loads the driver library, so it is imported by a first launch, not by the plugin)."""
    global launch_fn
    if launch_fn is None:
        from cuda.core import launch

        launch_fn = launch
    return launch_fn


def core_stream(handle: int) -> Any:
    """A cuda.core ``Stream`` viewing the stream ``handle`` (not owning it)."""
    global stream_fn
    if stream_fn is None:
        from cuda.core import Stream

        stream_fn = Stream.from_handle
    return stream_fn(handle)


def where(op: str | None, function: Function, config: LaunchConfig) -> str:
    plugin = op.split(".", 1)[0] if op else "?"
    return f"kernel {function.name!r} (plugin {plugin!r}, op {op!r}, {config})"


def launch_failed(
    runtime: CudaRuntime, op: str | None, exc: Exception, function: Function, config: LaunchConfig
) -> Exception:
    """The typed error for a launch cuda.core refused (poisoning on a sticky fault)."""
    text = str(exc)
    sticky = next((name for name in STICKY_FAULT_NAMES if name in text), None)
    at = where(op, function, config)
    if sticky is not None:
        poison(runtime.uuid_bytes, f"{sticky} at {at}")
        return failure(_STICKY_CODE, f"launching {at}", uuid=runtime.uuid_bytes, op=op)
    return LaunchError(f"launching {at} failed: {text}", op=op)


def debug_wait(
    runtime: CudaRuntime, op: str | None, stream: Any, function: Function, config: LaunchConfig
) -> None:
    """Debug mode: wait after the launch and name the kernel that faulted."""
    runtime.counters.add("debug_waits")
    result = runtime.driver.cuStreamSynchronize(stream)
    code = int(result[0])
    if code == 0:
        return
    name = error_name(result[0])
    at = where(op, function, config)
    if code in STICKY_FAULTS:
        poison(runtime.uuid_bytes, f"{name} in {at}")
    raise LaunchError(
        f"{at} faulted: {name}. The device's primary context is now poisoned for every runtime "
        "in this process; fix the kernel and restart",
        op=op,
    )


__all__ = ["core_launch", "core_stream", "debug_wait", "launch_failed", "where"]

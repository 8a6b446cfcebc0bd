"""Loaded modules and their functions, owned so that retirement really unloads them.

Images are loaded with the driver's library API (``cuLibraryLoadData``): a module is a
``CUlibrary`` and a function a ``CUkernel``, which cuda.core wraps as its ``Kernel`` (so a launch
goes through cuda.core's ``launch``). A :class:`Module` and each of its :class:`Function` objects
keep a :class:`LoadedModule` (the library handle). A launch needs a Function, so every launch of
a module's kernels was enqueued before its last reference went; the runtime has one stream, so
an event recorded when that happens (at the next drain point) follows all of them, and the
library is unloaded once that event completes — no per-session lease, and dropping a Module
right after a launch never unloads code a kernel still runs.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tenferro_host import (
    ArgumentMismatchError,
    InvalidLaunchConfigError,
    ModuleLoadError,
    SymbolLookupError,
    ValidationError,
)
from tenferro_host.provider import Memo, MemoKind, refuse_in_capture

from ._args import LaunchConfig
from ._driver import NOT_FOUND, check, failure

if TYPE_CHECKING:
    from ._runtime import CudaRuntime

_LOAD_HINTS = {
    200: "the image is not a valid CUBIN/fatbin for this driver",
    209: "the image has no code for this GPU's architecture; compile for the device's sm_XY "
    "or include PTX",
    218: "the PTX is invalid (see the driver's JIT log)",
    222: "the PTX was made by a compiler newer than this driver supports; compile to CUBIN "
    "(NvrtcOptions() default) or use an NVRTC no newer than the driver",
}


#: Per function: the launch configs checked against its and the device's limits, and their
#: cuda.core LaunchConfig (made once, reused by every session).
CHECKED_CONFIGS = MemoKind("cuda.checked_configs", 4096, what="configs checked per function")
CORE_CONFIGS = MemoKind("cuda.core_configs", 4096, what="cuda.core configs per function")


class LoadedModule:
    """Owns one ``CUlibrary``; unloaded stream-ordered after its last reference goes.

    Its finalizer (:func:`weakref.finalize`, which holds only the runtime's deferred queue and
    the handle) queues ``("module", handle)`` there; the runtime unloads behind an event.
    """

    __slots__ = ("__weakref__", "handle")

    def __init__(self, runtime: CudaRuntime, handle: Any) -> None:
        self.handle = handle
        runtime.module_counts["loaded"] += 1
        finalizer = weakref.finalize(self, runtime.deferred.append, ("module", handle))
        finalizer.atexit = False  # at exit the driver goes with the process


def _load_error(runtime: CudaRuntime, err: Any, kind: str, op: str | None) -> Exception:
    hint = _LOAD_HINTS.get(int(err), "check the image and the device")
    exc = failure(
        err, f"loading a {kind} module", uuid=runtime.uuid_bytes, op=op, error=ModuleLoadError
    )
    if isinstance(exc, ModuleLoadError):
        exc = ModuleLoadError(f"{exc.message}; {hint}", op=op)
    return exc


def load_image(
    runtime: CudaRuntime,
    data: bytes,
    kind: str,
    op: str | None,
    lowered: Mapping[str, str] | None = None,
) -> Module:
    """Load an already validated image into the runtime's primary context, eagerly."""
    refuse_in_capture(
        runtime,
        f"loading a {kind} module",
        f"load it once before the capture: call op {op!r} with the same inputs first (a warm-up)",
        op,
    )
    d = runtime.driver
    with runtime.primary:
        result = d.cuLibraryLoadData(data, [], [], 0, [], [], 0)
        if int(result[0]) != 0:
            raise _load_error(runtime, result[0], kind, op)
        library = result[1]
        # Libraries load lazily; asking for this context's module loads (and JITs) it now, so
        # a bad image fails here and not at its first launch.
        loaded = d.cuLibraryGetModule(library)
        if int(loaded[0]) != 0:
            d.cuLibraryUnload(library)
            raise _load_error(runtime, loaded[0], kind, op)
    owner = LoadedModule(runtime, library)
    return Module(runtime, owner, kind, len(data), dict(lowered or {}))


class Module:
    """A loaded CUDA module; ``function(name)`` looks a kernel up."""

    def __init__(
        self,
        runtime: CudaRuntime,
        owner: LoadedModule,
        kind: str,
        nbytes: int,
        lowered: dict[str, str],
    ) -> None:
        self.runtime = runtime
        self.kind = kind
        self.nbytes = nbytes
        self._owner = owner
        self._lowered = lowered
        self._functions: dict[str, Function] = {}

    def function(self, name: str) -> Function:
        """The kernel ``name`` (a name expression given to NVRTC, or the symbol)."""
        if not isinstance(name, str) or not name:
            raise ValidationError(
                f"kernel name must be a non-empty str, got {name!r}", argument="name"
            )
        found = self._functions.get(name)
        if found is None:
            found = self._functions[name] = Function(self, name, self._lowered.get(name, name))
        return found

    def __repr__(self) -> str:
        return f"<Module {self.kind} {self.nbytes} B on {self.runtime.name}>"


def _attr(d: Any, kernel: Any, device: Any, name: str) -> int:
    attr = getattr(d.CUfunction_attribute, name)
    return int(check(d.cuKernelGetAttribute(attr, kernel, device), name))


class Function:
    """A kernel with its parameter layout (``cuKernelGetParamInfo``) and its own limits."""

    def __init__(self, module: Module, name: str, symbol: str) -> None:
        from cuda.core import Kernel  # cuda.core loads the driver library: not with the plugin

        runtime = module.runtime
        d, dev = runtime.driver, runtime.cu_device
        with runtime.primary:
            result = d.cuLibraryGetKernel(module._owner.handle, symbol.encode())
            if int(result[0]) == NOT_FOUND:
                raise SymbolLookupError(
                    f'kernel {name!r} is not in this module; declare it extern "C" (or pass '
                    "its C++ spelling in NvrtcOptions(name_expressions=[...]))"
                )
            handle = check(
                result,
                f"cuLibraryGetKernel({name!r})",
                uuid=runtime.uuid_bytes,
                error=SymbolLookupError,
            )
            sizes: list[int] = []
            while True:
                info = d.cuKernelGetParamInfo(handle, len(sizes))
                if int(info[0]) != 0:
                    break
                sizes.append(int(info[2]))
            self.max_threads_per_block = _attr(
                d, handle, dev, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"
            )
            self.static_shared_bytes = _attr(d, handle, dev, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")
            self._dynamic_limit = _attr(
                d, handle, dev, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"
            )
        self.core_kernel = Kernel.from_handle(int(handle))
        self.name = name
        self.runtime = runtime  # no reference to the Module: dropping it must free the handle
        self.handle = handle
        self.owner = module._owner
        self.param_sizes = tuple(sizes)
        self._checked_codes: set[tuple[str, ...]] = set()
        #: (id(config), argument codes) -> the validated launch, reused by every session
        self.launches: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._configs: Memo[LaunchConfig, bool] = CHECKED_CONFIGS.new()
        #: checked configs -> their cuda.core LaunchConfig (made once, reused by every session)
        self._core_configs: Memo[LaunchConfig, Any] = CORE_CONFIGS.new()

    @property
    def arity(self) -> int:
        """Number of kernel parameters."""
        return len(self.param_sizes)

    def check_arguments(self, codes: tuple[str, ...], op: str | None) -> None:
        """Arguments of these struct codes match the parameters' count and byte sizes."""
        if codes in self._checked_codes:
            return
        if len(codes) != self.arity:
            raise ArgumentMismatchError(
                f"kernel {self.name!r} takes {self.arity} arguments, got {len(codes)}; pass one "
                "ref, DeviceBytes or typed scalar per kernel parameter",
                argument="args",
                op=op,
            )
        for i, (code, size) in enumerate(zip(codes, self.param_sizes, strict=True)):
            got = struct.calcsize("<" + code)
            if got != size:
                raise ArgumentMismatchError(
                    f"argument {i} of kernel {self.name!r} is {got} bytes but the kernel's "
                    f"parameter {i} is {size} bytes; pass the typed scalar of that C type "
                    "(i32, i64, f32, ...) or a pointer (ref) for a pointer parameter",
                    argument=f"args[{i}]",
                    op=op,
                )
        self._checked_codes.add(codes)

    def check_config(self, config: LaunchConfig, op: str | None) -> None:
        """Compare ``config`` with min(device, function) limits; opt in to large dynamic smem."""
        if not isinstance(config, LaunchConfig):
            raise InvalidLaunchConfigError(
                f"config must be a LaunchConfig, got {type(config).__name__}",
                argument="config",
                op=op,
            )
        if config in self._configs:
            return
        info = self.runtime.device_info
        for axis, (g, limit) in enumerate(zip(config.grid, info.max_grid_dims, strict=True)):
            if g > limit:
                raise InvalidLaunchConfigError(
                    f"grid {'xyz'[axis]} = {g} exceeds the device limit {limit}; fold the work "
                    "into more grid dimensions or loop inside the kernel",
                    argument="config.grid",
                    op=op,
                )
        for axis, (b, limit) in enumerate(zip(config.block, info.max_block_dims, strict=True)):
            if b > limit:
                raise InvalidLaunchConfigError(
                    f"block {'xyz'[axis]} = {b} exceeds the device limit {limit}",
                    argument="config.block",
                    op=op,
                )
        threads = config.threads_per_block
        limit = min(info.max_threads_per_block, self.max_threads_per_block)
        if threads > limit:
            who = "kernel" if self.max_threads_per_block < info.max_threads_per_block else "device"
            raise InvalidLaunchConfigError(
                f"block of {threads} threads exceeds the {who} limit of {limit} threads per "
                f"block for {self.name!r} (device {info.max_threads_per_block}, kernel "
                f"{self.max_threads_per_block}); use smaller blocks",
                argument="config.block",
                op=op,
            )
        dynamic = config.shared_mem_bytes
        room = info.max_shared_memory_per_block_optin - self.static_shared_bytes
        if dynamic > room:
            raise InvalidLaunchConfigError(
                f"{dynamic} bytes of dynamic shared memory exceed what {self.name!r} can get: "
                f"{info.max_shared_memory_per_block_optin} (device opt-in maximum) - "
                f"{self.static_shared_bytes} (static) = {room}",
                argument="config.shared_mem_bytes",
                op=op,
            )
        if dynamic > self._dynamic_limit:
            d = self.runtime.driver
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            with self.runtime.primary:
                check(
                    d.cuKernelSetAttribute(attr, dynamic, self.handle, self.runtime.cu_device),
                    "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                    uuid=self.runtime.uuid_bytes,
                    op=op,
                )
            self._dynamic_limit = dynamic
        self._configs.put(config, True)

    def core_config(self, config: LaunchConfig) -> Any:
        """The cuda.core ``LaunchConfig`` of a config :meth:`check_config` accepted."""
        found = self._core_configs.get(config)
        if found is None:
            from cuda.core import LaunchConfig as CoreLaunchConfig  # (as Kernel above)

            found = self._core_configs.put(
                config,
                CoreLaunchConfig(
                    grid=config.grid, block=config.block, shmem_size=config.shared_mem_bytes
                ),
            )
        return found

    def __repr__(self) -> str:
        return f"<Function {self.name} params={self.param_sizes}>"


__all__ = ["Function", "LoadedModule", "Module", "load_image"]

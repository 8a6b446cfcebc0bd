r"""A recording stand-in of the raw CUDA session: runs a ``cuda-raw`` variant with no GPU.

The variant gets an exec session of the CPU runtime whose ``raw(op)`` is a
:class:`RecordingRawSession`: borrows, outputs and workspaces are CPU tensors, modules are PTX
that NVRTC made from the op's declared ``KernelSource``\ s (or the source the variant compiles),
and every ``launch`` checks the argument list against the kernel's ``.entry`` parameters
(:mod:`.ptx`) instead of running it. Nothing is computed, so outputs are not compared.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    ArgumentMismatchError,
    InvalidLayoutError,
    SessionClosedError,
    SymbolLookupError,
    ValidationError,
)
from ..ops import KernelSource
from ..provider._storage import require_writable
from ..tensor import Tensor
from .ptx import PtxParam, parse_entries

#: The virtual architecture the stand-in compiles PTX for (any one shows the parameters).
PTX_ARCH = "compute_90"
POINTER_BYTES = 8


def compile_ptx(source: str | bytes, name: str = "kernel.cu") -> bytes:
    """PTX of CUDA C ``source`` through the registered ``cuda`` source compiler (NVRTC: needs
    the ``cuda`` extra, not a GPU)."""
    from ..compile_only import compile_source

    image = compile_source(source, arch=PTX_ARCH, name=name).image
    assert image is not None  # a cuda source compiler always gives an image
    return image


def kernel_text(kernel: KernelSource) -> str:
    """The CUDA C of a declared kernel (its ``source`` may be a function returning it)."""
    source = kernel.source() if callable(kernel.source) else kernel.source
    return source.decode() if isinstance(source, bytes) else str(source)


@dataclass(frozen=True)
class RecordedFunction:
    """A kernel of a recorded module: its name and PTX parameters."""

    name: str
    params: tuple[PtxParam, ...]


class RecordedModule:
    """The ``.entry`` kernels of some PTX; ``function(name)`` like a loaded module."""

    def __init__(self, entries: dict[str, tuple[PtxParam, ...]], origin: str) -> None:
        self.entries = entries
        self.origin = origin

    def function(self, name: str) -> RecordedFunction:
        """The kernel ``name`` of this module, or SymbolLookupError."""
        if name not in self.entries:
            raise SymbolLookupError(
                f"no kernel {name!r} in {self.origin}; it has {', '.join(self.entries) or 'none'} "
                '(declare C++ kernels extern "C" or look them up by their mangled name)'
            )
        return RecordedFunction(name, self.entries[name])


@dataclass(frozen=True)
class RecordedLaunch:
    """One launch: the kernel name and the byte size of each argument."""

    function: str
    arg_bytes: tuple[int, ...]


class RecordedPointer:
    """What ``tensor``/``tensor_mut``/``workspace`` hand out: a pointer-sized argument."""

    nbytes_as_arg = POINTER_BYTES

    def __init__(self, session: RecordingRawSession, tensor: Tensor | None, write: bool) -> None:
        self._session = session
        self.tensor = tensor
        self.readonly = not write


class RecordingRawSession:
    """``ex.raw(op)`` of the stand-in: records and checks launches, runs nothing."""

    def __init__(self, runtime: Any, op: str, declared: Callable[[], RecordedModule]) -> None:
        self.runtime = runtime
        self.op = op
        self._declared = declared
        self._resources: dict[Hashable, Any] = {}
        self.launches: list[RecordedLaunch] = []
        self.closed = False

    def __enter__(self) -> RecordingRawSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.closed = True

    def _check(self) -> None:
        if self.closed:
            raise SessionClosedError("this raw session has ended", op=self.op)

    # -- borrows and memory ------------------------------------------------------------------
    def _borrow(self, t: Any, argument: str, compact: bool, write: bool) -> RecordedPointer:
        self._check()
        if not isinstance(t, Tensor):
            raise ValidationError(
                f"{argument} needs a Tensor, got {type(t).__name__}", argument=argument, op=self.op
            )
        if write:
            require_writable(t, f"rs.{argument}(t) borrows it for writing", "t", self.op)
        if compact and not t.is_compact():
            raise InvalidLayoutError(
                f"{argument} needs a compact tensor (strides {t.strides}); canonicalize it or use "
                f"{argument.replace('tensor', 'tensor_strided')}",
                argument=argument,
                op=self.op,
            )
        return RecordedPointer(self, t, write)

    def tensor(self, t: Tensor) -> RecordedPointer:
        """Borrow a compact tensor for reading."""
        return self._borrow(t, "tensor", compact=True, write=False)

    def tensor_mut(self, t: Tensor) -> RecordedPointer:
        """Borrow a compact tensor for writing."""
        return self._borrow(t, "tensor_mut", compact=True, write=True)

    def tensor_strided(self, t: Tensor) -> RecordedPointer:
        """Borrow a tensor of any layout for reading."""
        return self._borrow(t, "tensor_strided", compact=False, write=False)

    def tensor_strided_mut(self, t: Tensor) -> RecordedPointer:
        """Borrow a tensor of any layout for writing."""
        return self._borrow(t, "tensor_strided_mut", compact=False, write=True)

    def alloc_output(self, dtype: Any, shape: Any) -> Tensor:
        """A new uninitialised CPU tensor."""
        self._check()
        out: Tensor = self.runtime.empty(dtype, shape)
        return out

    def workspace(self, nbytes: int) -> RecordedPointer:
        """A stand-in pointer for ``nbytes`` of scratch memory (no memory behind it)."""
        self._check()
        return RecordedPointer(self, None, write=True)

    def resource(self, key: Hashable, init: Callable[[], Any], nbytes: int | None = None) -> Any:
        """The resource cached for ``key`` in this session, made with ``init()`` once."""
        self._check()
        if key not in self._resources:
            self._resources[key] = init()
        return self._resources[key]

    def synchronize(self) -> None:
        """Nothing to wait for: nothing runs."""
        self._check()

    # -- modules -------------------------------------------------------------------------------
    def load_ptx(self, ptx: bytes | str) -> RecordedModule:
        """The ``.entry`` kernels of ``ptx``."""
        self._check()
        return RecordedModule(parse_entries(ptx), "the loaded PTX")

    def load_cubin(self, image: bytes) -> RecordedModule:
        """A prebuilt image: its kernels are taken from the op's declared KernelSources."""
        self._check()
        return self._declared()

    def compile_nvrtc(self, source: str | bytes, options: Any = None) -> RecordedModule:
        """The kernels of ``source``, compiled to PTX with NVRTC."""
        self._check()
        return RecordedModule(parse_entries(compile_ptx(source)), "the compiled source")

    # -- launches ------------------------------------------------------------------------------
    def launch(self, function: Any, config: Any, args: Sequence[Any]) -> None:
        """Check ``args`` against the kernel's PTX parameters and record the launch."""
        self._check()
        if not isinstance(function, RecordedFunction):
            raise ValidationError(
                f"launch needs a function of a module of this session, got "
                f"{type(function).__name__}",
                argument="function",
                op=self.op,
            )
        sizes = tuple(_arg_bytes(i, a, self.op) for i, a in enumerate(args))
        want = tuple(p.nbytes for p in function.params)
        if sizes != want:
            described = ", ".join(f".{p.type}" for p in function.params) or "none"
            raise ArgumentMismatchError(
                f"launch of kernel {function.name!r} passes {len(sizes)} argument(s) of "
                f"{list(sizes)} bytes; its PTX .entry takes {len(want)} ({described}) of "
                f"{list(want)} bytes: make the argument list match the kernel's parameters",
                argument="args",
                op=self.op,
            )
        self.launches.append(RecordedLaunch(function.name, sizes))


def _arg_bytes(index: int, arg: Any, op: str) -> int:
    from .. import cuda  # the public face of the raw seam: its typed scalars (raw.i32 ...)

    if isinstance(arg, RecordedPointer):
        return arg.nbytes_as_arg
    if isinstance(arg, cuda.raw.Scalar):
        return int(arg.nbytes)
    raise ArgumentMismatchError(
        f"launch argument #{index} is a {type(arg).__name__}; pass borrows (rs.tensor(t), "
        "rs.tensor_mut(t), rs.workspace(n)) or raw scalars (raw.i32(n), raw.f32(x) ...)",
        argument="args",
        op=op,
    )


class RecordingExecSession:
    """An exec session of the CPU runtime whose ``raw(op)`` is a :class:`RecordingRawSession`."""

    def __init__(self, ex: Any, kernels: Sequence[KernelSource]) -> None:
        self._ex = ex
        self._kernels = kernels
        self._declared: RecordedModule | None = None
        self.raw_sessions: list[RecordingRawSession] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ex, name)

    @property
    def kind(self) -> str:
        """Always ``cuda``: the variant under test is a CUDA one."""
        return "cuda"

    def declared_module(self) -> RecordedModule:
        """Every kernel of the op's declared CUDA KernelSources, compiled once to PTX."""
        if self._declared is None:
            entries: dict[str, tuple[PtxParam, ...]] = {}
            for k in self._kernels:
                if k.language == "cuda":
                    entries.update(parse_entries(compile_ptx(kernel_text(k), f"{k.name}.cu")))
            self._declared = RecordedModule(entries, "the op's declared CUDA KernelSources")
        return self._declared

    def raw(self, op: str) -> RecordingRawSession:
        """A new recording raw session for ``op``."""
        rs = RecordingRawSession(self._ex.runtime, op, self.declared_module)
        self.raw_sessions.append(rs)
        return rs


__all__ = [
    "RecordedLaunch",
    "RecordedModule",
    "RecordingExecSession",
    "RecordingRawSession",
    "compile_ptx",
    "kernel_text",
]

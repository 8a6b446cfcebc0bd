"""The raw CUDA session (docs/contract.md): load modules, borrow tensors, launch on the stream.

Reached as ``tenferro_host.cuda.raw``. A :class:`RawSession` comes only from
``CudaExecSession.raw(op)``; everything it hands out (:class:`TensorRef`, :class:`TensorMut`,
:class:`DeviceBytes`, :class:`StreamRef`, :class:`PreparedLaunch`) is a session handle that
raises :class:`~tenferro_host.errors.SessionClosedError` once the session has ended. Launches
are checked (arity and byte size of every argument, the config against min(device, function)
limits) before anything is enqueued, and never synchronize.

>>> from tenferro_host_cuda import raw
>>> raw.LaunchConfig.flat(8, 128)
LaunchConfig(grid=(1, 1, 1), block=(128, 1, 1), shared_mem_bytes=0)
>>> raw.i32(8), raw.f32(0.5).nbytes
(i32(8), 4)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from tenferro_host import (
    AliasingError,
    ArgumentMismatchError,
    ForeignRuntimeError,
    InvalidLayoutError,
    Tensor,
    ValidationError,
)
from tenferro_host.provider import (
    RECORDING,
    OpRecording,
    Session,
    refuse_in_capture,
    require_resident,
    require_writable,
)

from . import _launch
from ._args import (
    LaunchConfig,
    Scalar,
    bool_,
    f16,
    f32,
    f64,
    i32,
    i64,
    u32,
    u64,
)
from ._driver import POISONED
from ._handles import (
    _RELEASED,
    EXCLUSIVE,
    DeviceBytes,
    PreparedLaunch,
    StreamRef,
    TensorMut,
    TensorRef,
    _give_back,
    _Launch,
    _PointerArg,
)
from ._images import as_bytes, check_binary, check_ptx
from ._launch import core_launch, debug_wait, launch_failed
from ._module import Function, Module, load_image
from ._nvrtc import CompiledImage, NvrtcOptions, compile_source
from ._storage import CudaStorage, check_positive_bytes

if TYPE_CHECKING:
    from ._exec_session import CudaExecSession
    from ._runtime import CudaRuntime

_log = logging.getLogger("tenferro_host_cuda")
_get_ident = threading.get_ident
_arg_of = attrgetter("_arg")


def nvrtc_compile(source: str | bytes, options: NvrtcOptions) -> CompiledImage:
    """Compile without loading (no GPU needed): ``options.arch`` names the target.

    For build steps and compile-only checks; inside a session use ``rs.compile_nvrtc``.
    """
    if not isinstance(options, NvrtcOptions) or options.arch is None:
        raise ValidationError(
            "nvrtc_compile needs NvrtcOptions(arch='sm_XY' or 'compute_XY')", argument="options"
        )
    return compile_source(source, options)


class RawSession(Session):
    """Raw native-module session of one CUDA runtime (from ``CudaExecSession.raw(op)``)."""

    kind_name = "raw session"

    def __init__(self, ex: CudaExecSession, op: str) -> None:
        if not isinstance(op, str) or not op:
            raise ValidationError(
                f"a raw session needs the op name (e.g. 'my_pkg.add'), got {op!r}", argument="op"
            )
        super().__init__(ex.runtime, op=op, parent=ex)
        self.runtime: CudaRuntime
        self._ex = ex
        self._saved_context: Any = None
        #: storage -> shared borrow count, or EXCLUSIVE; a ref's death gives its borrow back
        self._borrows: dict[Any, int] = {}
        self._workspaces: list[CudaStorage] | None = None

    # -- enter / exit ----------
    def _on_enter(self) -> None:
        rt = self.runtime
        if rt.closed or POISONED:  # one check per session; a fault found later poisons
            rt.check_usable()
        self._saved_context = rt.primary.enter()
        self._stream = rt._stream
        self._domain = rt.domain
        self._cu_launch = _launch.launch_fn or core_launch()
        self._debug = rt.debug_sync

    def _on_exit(self, error: BaseException | None) -> None:
        """Free the workspaces (stream-ordered) and restore the caller's context. No event:
        memory and modules are released stream-ordered when dropped (one stream per runtime),
        so nothing this session launched needs a lease."""
        rt = self.runtime
        try:
            if self._workspaces:
                for storage in self._workspaces:
                    rt.free_now(storage)
                self._workspaces = None
        except Exception:
            if error is None:
                raise
            _log.exception("ending raw session %r after an error failed", self.op)
        finally:
            self._borrows = {}
            try:
                rt.primary.exit(self._saved_context)
            except Exception:
                _log.exception("restoring the CUDA context after raw session %r failed", self.op)

    # -- tensors and memory ----------
    def _borrow(self, storage: Any, exclusive: bool, argument: str) -> None:
        held = self._borrows.get(storage)
        if held is None:
            self._borrows[storage] = EXCLUSIVE if exclusive else 1
        elif held == EXCLUSIVE or exclusive:
            raise self._aliasing(held, argument)
        else:
            self._borrows[storage] = held + 1

    def _aliasing(self, held: int, argument: str) -> AliasingError:
        return AliasingError(
            f"{argument} shares storage with a tensor already borrowed "
            f"{'exclusively' if held == EXCLUSIVE else 'in this session'}; an exclusive "
            "borrow (tensor_mut) conflicts with every other borrow of that storage, views "
            "included — write into a fresh alloc_output instead",
            argument=argument,
            op=self.op,
        )

    def _resident(self, t: Any, argument: str, compact: bool, write: bool = False) -> Tensor:
        self._check()
        t = require_resident(self.runtime, t, argument=argument, op=self.op)
        if write:
            mut = "rs.tensor_mut" if compact else "rs.tensor_strided_mut"
            require_writable(t, f"{mut}({argument}) borrows it for writing", argument, self.op)
        if compact and not t.is_compact():
            strided = "rs.tensor_strided_mut(t)" if write else "rs.tensor_strided(t)"
            raise InvalidLayoutError(
                f"{argument} is a non-compact view (shape {t.shape}, strides {t.strides}); use "
                f"{strided} and pass offset/shape/strides to the kernel, or make a "
                "compact copy with backend.canonicalize(t)",
                argument=argument,
                op=self.op,
            )
        return t

    def tensor(self, t: Tensor) -> TensorRef:
        """Shared borrow of a compact tensor of this runtime; pointer to its first element."""
        if (
            self._owner == _get_ident()
            and type(t) is Tensor
            and t.is_compact()
            and t.storage.domain is self._domain
        ):  # the common case, every check inline: open, own thread, compact, resident
            storage = t.storage
            held = self._borrows.get(storage)
            if held is None:
                self._borrows[storage] = 1
            elif held == EXCLUSIVE:
                raise self._aliasing(held, "t")
            else:
                self._borrows[storage] = held + 1
            ptr = getattr(storage, "ptr", 0)  # an empty tensor's storage holds none
            return TensorRef(self, t, ptr + t.offset * t.dtype.itemsize if ptr else 0, 0)
        t = self._resident(t, "t", compact=True)
        self._borrow(t.storage, False, "t")
        base = getattr(t.storage, "ptr", 0)
        return TensorRef(self, t, base + t.offset * t.dtype.itemsize if base else 0, 0)

    def tensor_strided(self, t: Tensor) -> TensorRef:
        """Shared borrow of any view; pointer to storage element 0, layout in the ref."""
        if self._owner == _get_ident() and type(t) is Tensor and t.storage.domain is self._domain:
            storage = t.storage
            held = self._borrows.get(storage)
            if held is None:
                self._borrows[storage] = 1
            elif held == EXCLUSIVE:
                raise self._aliasing(held, "t")
            else:
                self._borrows[storage] = held + 1
            return TensorRef(self, t, getattr(storage, "ptr", 0), t.offset)
        t = self._resident(t, "t", compact=False)
        self._borrow(t.storage, False, "t")
        return TensorRef(self, t, getattr(t.storage, "ptr", 0), t.offset)

    def tensor_mut(self, t: Tensor) -> TensorMut:
        """Exclusive borrow of a compact tensor (``AliasingError`` on any other borrow)."""
        if (
            self._owner == _get_ident()
            and type(t) is Tensor
            and t.is_compact()
            and t.storage.domain is self._domain
            and not t.storage.read_only
        ):  # the common case, every check inline (as tensor(), plus writable)
            storage = t.storage
            held = self._borrows.get(storage)
            if held is not None:
                raise self._aliasing(held, "t")
            self._borrows[storage] = EXCLUSIVE
            ptr = getattr(storage, "ptr", 0)  # an empty tensor's storage holds none
            return TensorMut(self, t, ptr + t.offset * t.dtype.itemsize if ptr else 0, 0)
        t = self._resident(t, "t", compact=True, write=True)
        self._borrow(t.storage, True, "t")
        base = getattr(t.storage, "ptr", 0)
        return TensorMut(self, t, base + t.offset * t.dtype.itemsize if base else 0, 0)

    def tensor_strided_mut(self, t: Tensor) -> TensorMut:
        """Exclusive borrow of any view; pointer to storage element 0, layout in the ref.

        The write counterpart of ``tensor_strided``: the kernel takes offset, shape and strides
        explicitly, and the borrow conflicts with every other borrow of the storage.
        """
        if (
            self._owner == _get_ident()
            and type(t) is Tensor
            and t.storage.domain is self._domain
            and not t.storage.read_only
        ):
            storage = t.storage
            held = self._borrows.get(storage)
            if held is not None:
                raise self._aliasing(held, "t")
            self._borrows[storage] = EXCLUSIVE
            return TensorMut(self, t, getattr(storage, "ptr", 0), t.offset)
        t = self._resident(t, "t", compact=False, write=True)
        self._borrow(t.storage, True, "t")
        return TensorMut(self, t, getattr(t.storage, "ptr", 0), t.offset)

    def release(self, ref: TensorRef) -> None:
        """End ``ref``'s borrow now instead of when the ref dies (a ref kept alive somewhere —
        a prepared launch, a traceback — keeps its borrow). The ref is refused from then on."""
        if self._owner != _get_ident():
            self._check()
        if not isinstance(ref, TensorRef) or ref._session is not self:
            raise ValidationError(
                f"release takes a ref this session issued (rs.tensor...), got {type(ref).__name__}",
                argument="ref",
                op=self.op,
            )
        if ref._arg[2] is not self:
            return  # released before
        ref._arg = ("Q", ref._value, _RELEASED)
        _give_back(self._borrows, ref.tensor.storage)

    def alloc_output(self, dtype: Any, shape: Any) -> Tensor:
        """A fresh compact tensor of this runtime (stream-ordered, uninitialised)."""
        if self._owner != _get_ident():
            self._check()
        out = self.runtime.empty(dtype, shape)  # which checks dtype and shape
        rec = RECORDING.rec  # the op call (or jit launch) being recorded on this thread, if any
        if rec is not None:
            out = rec.output(out)
        return out

    def workspace(self, nbytes: int) -> DeviceBytes:
        """Scratch memory freed stream-ordered when the session ends."""
        self._check()
        rec = RECORDING.rec
        if rec is not None:
            rec.refuse("a workspace (rs.workspace)")
        nbytes = check_positive_bytes(nbytes, "nbytes", self.op)
        if nbytes == 0:
            return DeviceBytes(self, 0, 0)
        storage = self.runtime.allocate_bytes(nbytes, self.op)
        if self._workspaces is None:
            self._workspaces = []
        self._workspaces.append(storage)
        return DeviceBytes(self, storage.ptr, nbytes)

    @property
    def stream(self) -> StreamRef:
        """The session's stream (the runtime's only stream)."""
        self._check()
        rec = RECORDING.rec
        if rec is not None:
            rec.refuse("the stream handed out (rs.stream)")
        return StreamRef(self, int(self._stream))

    # -- modules ----------
    def load_ptx(self, ptx: bytes | str) -> Module:
        """Validate and load PTX text at once (``ModuleLoadError`` here, not at launch)."""
        self._check()
        data = check_ptx(as_bytes(ptx, "ptx", self.op), self.op)
        return load_image(self.runtime, data, "ptx", self.op)

    def load_cubin(self, image: bytes) -> Module:
        """Validate and load a CUBIN (ELF) or fatbin image at once."""
        self._check()
        data = as_bytes(image, "image", self.op)
        kind = check_binary(data, self.op)
        return load_image(self.runtime, data, kind, self.op)

    def compile_nvrtc(self, source: str | bytes, options: NvrtcOptions | None = None) -> Module:
        """Compile with NVRTC (CUBIN for this device's sm_XY unless PTX is asked) and load."""
        self._check()
        refuse_in_capture(
            self.runtime,
            "an NVRTC compile",
            f"compile it once before the capture: call op {self.op!r} first (a warm-up)",
            self.op,
        )
        image = compile_source(
            source,
            options,
            device_arch=self.runtime.device_info.arch,
            name=f"{self.op}.cu",
            op=self.op,
        )
        if image.kind == "ptx":
            data = check_ptx(image.data, self.op)
        else:
            data = image.data
            check_binary(data, self.op)
        return load_image(self.runtime, data, image.kind, self.op, image.lowered_names)

    def resource(self, key: Hashable, init: Callable[[], Any], nbytes: int | None = None) -> Any:
        """A value from the runtime's bounded cache, made by ``init()`` on a miss."""
        if self._owner != _get_ident():
            self._check()
        return self.runtime.resources.get(key, init, nbytes)

    # -- launches ----------
    def _unpack(self, args: Sequence[Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        """Struct codes and values of ``args``, checking that refs belong to a live session."""
        if not args:
            if args is None or not isinstance(args, (list, tuple)):
                raise self._bad_args(args)
            return (), ()
        try:
            codes, values, owners = zip(*map(_arg_of, args))  # noqa: B905 - triples
        except (AttributeError, TypeError):
            raise self._bad_args(args) from None
        if owners.count(self) + owners.count(None) != len(owners):
            for owner in owners:
                if owner is not self and owner is not None:
                    self._check_foreign_session(owner)
        return codes, values

    def _check_foreign_session(self, owner: Any) -> None:
        owner._check()
        if owner.runtime is not self.runtime:
            raise ForeignRuntimeError(
                f"a ref of runtime {owner.runtime.name!r} was passed to a launch on "
                f"{self.runtime.name!r}; borrow tensors in this runtime's session",
                op=self.op,
            )

    def _bad_args(self, args: Any) -> Exception:
        if not isinstance(args, (list, tuple)):
            return ArgumentMismatchError(
                f"args must be a list or tuple, got {type(args).__name__}",
                argument="args",
                op=self.op,
            )
        for i, a in enumerate(args):
            if not isinstance(a, (Scalar, _PointerArg)):
                what = (
                    "a bare Python number; wrap it in a typed scalar (i32, u32, i64, u64, f32, "
                    "f64, f16, bool_) so its size is explicit"
                    if isinstance(a, (int, float, bool))
                    else f"a {type(a).__name__}; pass rs.tensor(t)/tensor_mut(t) refs, DeviceBytes "
                    "or typed scalars"
                )
                return ArgumentMismatchError(
                    f"argument {i} is {what}", argument=f"args[{i}]", op=self.op
                )
        return ArgumentMismatchError("invalid kernel arguments", argument="args", op=self.op)

    def _validated(
        self, function: Function, config: LaunchConfig, codes: tuple[str, ...]
    ) -> _Launch:
        """Check function, config and argument sizes; a fresh parameter block for them."""
        if not isinstance(function, Function):
            raise ValidationError(
                f"function must come from module.function(name), got {type(function).__name__}",
                argument="function",
                op=self.op,
            )
        if function.runtime is not self.runtime:
            raise ForeignRuntimeError(
                f"kernel {function.name!r} was loaded by runtime {function.runtime.name!r}; load "
                f"the module in a session of {self.runtime.name!r}",
                op=self.op,
            )
        function.check_config(config, self.op)
        function.check_arguments(codes, self.op)
        return _Launch(function, config, codes, self.runtime.core_stream)

    def _plan(self, function: Function, config: LaunchConfig, codes: tuple[str, ...]) -> _Launch:
        """The validated launch of (function, config, codes): the function's cached one, else
        checked now and cached on the function for every later session."""
        if type(function) is not Function or function.runtime is not self.runtime:
            return self._validated(function, config, codes)  # raises the typed error
        key = (id(config), codes)
        plan = function.launches.get(key)
        if plan is None or plan.config is not config:
            plan = self._validated(function, config, codes)
            if len(function.launches) >= 256:
                function.launches.clear()
            function.launches[key] = plan
        return plan

    def launch(self, function: Function, config: LaunchConfig, args: Sequence[Any]) -> None:
        """Check and enqueue ``function`` on the session's stream; never waits."""
        if self._owner != _get_ident():
            self._check()
        codes, values = self._unpack(args)
        plan = self._plan(function, config, codes)
        try:
            self._cu_launch(*plan.call, *values)
        except Exception as exc:
            raise self._launch_failed(exc, function, config) from exc
        if self._debug:
            self._debug_wait(function, config)
        rec = RECORDING.rec
        if rec is not None:
            self._record(rec, function, config, args, values)

    def prepare(
        self, function: Function, config: LaunchConfig, args: Sequence[Any]
    ) -> PreparedLaunch:
        """Validate once; the returned object re-enqueues with one driver call."""
        self._check()
        codes, values = self._unpack(args)
        plan = self._plan(function, config, codes)
        return PreparedLaunch(self, function, plan, tuple(args), values)

    def _record(
        self,
        rec: OpRecording,
        function: Function,
        config: LaunchConfig,
        args: Sequence[Any],
        values: Sequence[Any],
    ) -> None:
        """Add this launch to the op call's recording: each argument an input or output slot
        (its storage's address plus a byte offset fixed by the call's key) or a constant;
        anything else refuses the recording."""
        slots = []
        consts = []
        for i, (arg, value) in enumerate(zip(args, values, strict=True)):
            if isinstance(arg, Scalar):
                consts.append((i, value.tobytes()))
                continue
            t: Any = arg.tensor if isinstance(arg, TensorRef) else None
            slot = rec.slot(t, isinstance(arg, TensorMut)) if t is not None else None
            if slot is None or not t.numel:
                rec.refuse(f"launch argument {i} is not a non-empty input or output tensor")
                return
            delta = (t.offset - arg.offset) * t.dtype.itemsize  # the view is part of the key
            if value != t.storage.ptr + delta:
                rec.refuse(f"launch argument {i} points elsewhere than its tensor's storage")
                return
            slots.append((i, *slot, delta))
        rec.launches.append((self.op, function, config, tuple(slots), tuple(consts)))

    def _launch_failed(self, exc: Exception, function: Function, config: LaunchConfig) -> Exception:
        return launch_failed(self.runtime, self.op, exc, function, config)

    def _debug_wait(self, function: Function, config: LaunchConfig) -> None:
        debug_wait(self.runtime, self.op, self._stream, function, config)

    def synchronize(self) -> None:
        """Wait for the stream (counted in ``synchronizations``)."""
        self._check()
        rec = RECORDING.rec
        if rec is not None:
            rec.refuse("a synchronization (rs.synchronize)")
        self.runtime.synchronize()


__all__ = [
    "CompiledImage",
    "DeviceBytes",
    "Function",
    "LaunchConfig",
    "Module",
    "NvrtcOptions",
    "PreparedLaunch",
    "RawSession",
    "Scalar",
    "StreamRef",
    "TensorMut",
    "TensorRef",
    "bool_",
    "f16",
    "f32",
    "f64",
    "i32",
    "i64",
    "nvrtc_compile",
    "u32",
    "u64",
]

"""The handles a raw session issues: tensor refs, device bytes, its stream, prepared launches.

Each is a :class:`~tenferro_host.provider.SessionHandle` of its :class:`~.raw.RawSession`
(refused once the session ended); a pointer argument carries ``_arg`` = (struct code, value,
owner) so a launch unpacks it with one attribute read. A tensor ref holds a borrow of its
storage, given back when it dies or at ``rs.release``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from tenferro_host import ArgumentMismatchError, SessionClosedError, Tensor
from tenferro_host.provider import RECORDING, SessionHandle

if TYPE_CHECKING:
    from ._args import LaunchConfig
    from ._module import Function
    from .raw import RawSession

_get_ident = threading.get_ident
#: a borrow count meaning "borrowed exclusively" (tensor_mut)
EXCLUSIVE = -1


class _Released:
    """The owner of a ref that ``rs.release`` ended: every use of it is refused."""

    __slots__ = ()
    runtime = None

    def _check(self) -> None:
        raise SessionClosedError(
            "this ref was released (rs.release); borrow the tensor again to use it"
        )


_RELEASED = _Released()


def _give_back(borrows: dict[Any, int], storage: Any) -> None:
    """End one borrow of ``storage`` in a session's borrow counts (a ref died or was released)."""
    held = borrows.get(storage)
    if held is not None:
        if held == EXCLUSIVE or held <= 1:
            del borrows[storage]
        else:
            borrows[storage] = held - 1


class _PointerArg(SessionHandle):
    """A device address valid inside its session; passed to kernels as a pointer."""

    __slots__ = ("_arg", "_value")
    _arg: tuple[str, int, Any]  # (struct code, value, owner: the session, or _RELEASED)

    def __init__(self, session: RawSession, ptr: int) -> None:
        self._session = session
        self._value = ptr
        self._arg = ("Q", ptr, session)  # (struct code, value, owner): one lookup per launch

    def _check(self) -> None:
        """Raise unless the session is open on this thread and the ref was not released."""
        owner = self._arg[2]
        if owner is not self._session and owner is not None:
            owner._check()  # a released ref: its owner is _RELEASED, which refuses
        self._session._check()

    def data_ptr_unsafe(self) -> int:
        """The device address, for foreign libraries; valid inside the session only."""
        self._check()
        return self._value


class TensorRef(_PointerArg):
    """A shared (read) borrow of a tensor.

    From ``tensor(t)`` the pointer is the first element and the layout compact; from
    ``tensor_strided(t)`` the pointer is the storage's element 0 and ``offset``, ``shape`` and
    ``strides`` (in elements) describe the view — the kernel takes them explicitly. The borrow
    lasts as long as the ref (or its session): dropping the ref releases it.
    """

    __slots__ = ("offset", "tensor")
    #: Whether the borrow is read-only (a class fact: TensorMut says False).
    readonly: ClassVar[bool] = True

    def __init__(self, session: RawSession, tensor: Tensor, ptr: int, offset: int) -> None:
        self._session = session
        self._value = ptr
        self._arg = ("Q", ptr, session)
        self.tensor = tensor
        self.offset = offset

    def __del__(self) -> None:
        if self._arg[2] is not self._session:
            return  # released by rs.release: its borrow already ended
        _give_back(self._session._borrows, self.tensor.storage)

    @property
    def dtype(self) -> Any:
        """The borrowed tensor's dtype."""
        return self.tensor.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The borrowed tensor's shape."""
        return self.tensor.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """The borrowed tensor's strides, in elements."""
        return self.tensor.strides

    @property
    def numel(self) -> int:
        """The borrowed tensor's number of elements."""
        return self.tensor.numel

    @property
    def nbytes(self) -> int:
        """The borrowed tensor's size in bytes."""
        return self.tensor.nbytes

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 of the view; valid inside the session only."""
        self._check()
        isz = self.dtype.itemsize
        return {
            "version": 3,
            "shape": self.shape,
            "strides": tuple(s * isz for s in self.strides),
            "typestr": self.dtype.numpy.str,
            "data": (self._value + self.offset * isz if self.numel else 0, self.readonly),
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dtype.name}{list(self.shape)}>"


class TensorMut(TensorRef):
    """An exclusive (write) borrow: no other borrow of the same storage in the session."""

    __slots__ = ()
    readonly: ClassVar[bool] = False


class DeviceBytes(_PointerArg):
    """Scratch device memory from ``workspace(nbytes)``; freed stream-ordered at session exit."""

    __slots__ = ("nbytes",)

    def __init__(self, session: RawSession, ptr: int, nbytes: int) -> None:
        super().__init__(session, ptr)
        self.nbytes = nbytes


class StreamRef(SessionHandle):
    """The session's stream, for foreign libraries (CuPy, cuBLAS ...) inside the session only."""

    __slots__ = ("_handle",)

    def __init__(self, session: RawSession, handle: int) -> None:
        self._session = session
        self._handle = handle

    def native_handle_unsafe(self) -> int:
        """The ``CUstream`` as an int; never keep it past the session, never destroy it."""
        self._check()
        return self._handle

    def __cuda_stream__(self) -> tuple[int, int]:
        """The cuda.core stream protocol (version 0, handle)."""
        self._check()
        return (0, self._handle)


class PreparedLaunch(SessionHandle):
    """A launch validated once: ``launch()`` re-enqueues it, ``launch(args=...)`` swaps refs.

    It keeps its arguments (and so their borrows) until the next swap or the session's end.
    """

    __slots__ = ("_args", "_call", "_codes", "_config", "_function")

    def __init__(
        self,
        session: RawSession,
        function: Function,
        entry: _Launch,
        args: tuple[Any, ...],
        values: tuple[Any, ...],
    ) -> None:
        self._session = session
        self._args = args
        self._function = function
        self._config = entry.config
        self._codes = entry.codes
        self._call = (*entry.call, *values)

    @property
    def function(self) -> Function:
        """The kernel this launch runs."""
        return self._function

    @property
    def config(self) -> LaunchConfig:
        """The grid, block and shared memory of this launch."""
        return self._config

    def launch(self, args: Sequence[Any] | None = None) -> None:
        """Enqueue again (with ``args`` of the same kinds and sizes swapped in, if given)."""
        s: RawSession = self._session  # type: ignore[assignment]
        if s._owner != _get_ident():
            s._check()
        if args is not None:
            codes, values = s._unpack(args)
            if codes != self._codes:
                raise ArgumentMismatchError(
                    f"launch(args=...) must keep the argument kinds and sizes of prepare() "
                    f"({self._codes}), got {codes}; prepare a new launch for other arguments",
                    argument="args",
                    op=s.op,
                )
            self._call = (*self._call[:3], *values)
            self._args = tuple(args)
        try:
            s._cu_launch(*self._call)
        except Exception as exc:
            raise s._launch_failed(exc, self._function, self._config) from exc
        if s._debug:
            s._debug_wait(self._function, self._config)
        rec = RECORDING.rec
        if rec is not None:
            s._record(rec, self._function, self._config, self._args, self._call[3:])


class _Launch:
    """A validated (function, config, argument kinds) and the head of its cuda.core call.

    Kept by the function (``Function.launches``, keyed by the config's identity and the
    argument codes), so every later session of the runtime reuses it; it holds its config, so
    the identity stays unique while it is cached, and not its function (no cycle: a dropped
    function, and so its module, is freed by reference counting).
    """

    __slots__ = ("call", "codes", "config")

    def __init__(
        self, function: Function, config: LaunchConfig, codes: tuple[str, ...], stream: Any
    ) -> None:
        self.config = config
        self.codes = codes
        self.call = (stream, function.core_config(config), function.core_kernel)

"""The CPU op replay: a recorded op call's ``ex.launch`` calls re-run on the call's tensors.

The recording (``_exec_session``) holds each launch as its function and every argument as an
input or output slot or a constant; the call key fixes each input's dtype, shape, strides and
offset, so each slot's numpy view is known but for its buffer. A call allocates the outputs,
makes the views — a whole 1-D storage is its array itself for a ufunc (which never changes its
operands' metadata), a plain ``view()`` for any other function — and calls each function: no
variant, no session. Nothing here is per thread; the CPU runtime is never poisoned or closed,
queues no deferred releases and leases nothing, so the guard is the read-only check of an
input the call writes (the full path raises its typed error). A DSL launch (the CPU jit
session's: a ``JitLaunchRecord`` whose form is a :class:`DslForm`) runs the interpreter again
over the call's storages, guarded by the dtype each storage is read as.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast, final

import numpy as np

from .. import TenferroError, Tensor
from ..provider import REPLAY_MISS, JitLaunchRecord, OpRecording, OpReplay, UfuncCore
from ._exec_session import Arg, LaunchRecord, launch_failed
from ._interpreter import ArrayArg, run
from ._storage import CpuStorage

if TYPE_CHECKING:
    from ..provider import JitLaunch
    from ._runtime import CpuRuntime

#: How one tensor argument's view is made: (position in the launch's argument list, 0 input /
#: 1 output, index, how, the bytes of a whole storage, shape, numpy dtype, byte offset, byte
#: strides); how: _FRESH (a 1-D output: its array), _WHOLE (a 1-D compact input at offset 0: its
#: array if the storage is no longer and has its dtype) or _VIEW (a view of the storage's bytes).
ViewRule = tuple[int, int, int, int, int, tuple[int, ...], Any, int, tuple[int, ...]]
_FRESH, _WHOLE, _VIEW = 0, 1, 2


class DslForm(NamedTuple):
    """A DSL launch on the CPU as its JIT session hands it to the recording
    (:class:`~tenferro_host.provider.JitLaunchRecord`'s ``form``): the specialization, the grid
    and each scalar argument (None where an array goes), with its bytes (equal forms are equal
    launches: ``-0.0`` is not ``0.0``)."""

    spec: Any
    cubes: tuple[int, int, int]  # the launch's cube count (``count`` is tuple's)
    dim: tuple[int, int, int]
    scalars: tuple[Any, ...]
    exact: tuple[bytes | None, ...]

    @classmethod
    def of(cls, launch: JitLaunch) -> DslForm:
        scalars = tuple(a if isinstance(a, np.generic) else None for a in launch.args)
        exact = tuple(None if a is None else a.tobytes() for a in scalars)
        return cls(launch.spec, launch.count, launch.dim, scalars, exact)


@final
class _DslLaunch:
    """A recorded DSL launch: the interpreter run again over a call's storages.

    Its slots index one sequence of tensors: an op call's inputs then its outputs (``ninputs``
    of them first), or a jit session's launch arguments (slots ``(0, i)`` only).
    """

    __slots__ = ("array_arg", "count", "dim", "rules", "run", "spec", "template", "typed")

    def __init__(self, record: JitLaunchRecord, ninputs: int = 0) -> None:
        self.array_arg, self.run = ArrayArg, run
        self.spec, self.count, self.dim, scalars, _ = record.form
        self.template = [*scalars]
        arrays = [(k, slot) for k, slot in enumerate(record.slots) if slot is not None]
        self.rules = tuple((k, index + ninputs * which) for k, (which, index) in arrays)
        #: (input, numpy dtype) its storage is read as: the full path refuses another
        params = self.spec.params
        self.typed = tuple(
            {(index, params[k].dtype.numpy) for k, (which, index) in arrays if which == 0}
        )

    def __call__(self, tensors: tuple[Any, ...]) -> Any:
        for i, npdt in self.typed:
            if tensors[i].storage.array.dtype is not npdt:
                return REPLAY_MISS
        args = [*self.template]
        for k, index in self.rules:
            t = tensors[index]
            args[k] = self.array_arg(t.storage.array, t.offset, t.shape, t.strides)
        return self.run(self.spec, self.count, self.dim, args)


@final
class _Launch:
    """One recorded launch: its argument list with the constants in place, the view rules."""

    __slots__ = ("bare", "fn", "names", "nout", "npos", "plain", "several", "template", "views")

    def __init__(self, record: LaunchRecord, layouts: tuple[list[Any], list[Any]]) -> None:
        self.fn, positional, named, written, self.several = record
        fn = self.fn
        self.bare = isinstance(fn, np.ufunc)
        slots: list[Arg] = [*positional, *(s for _, s in named), *written]
        self.npos, self.nout = len(positional), len(written)
        self.names = tuple(name for name, _ in named)
        #: a ufunc's arguments and its one output, all positional
        self.plain = (
            isinstance(fn, np.ufunc) and fn.nin == self.npos and not named and not self.several
        )
        self.template = [value[1] if which == 2 else None for which, value in slots]
        rules: list[ViewRule] = []
        for k, (which, index) in enumerate(slots):
            if which == 2:
                continue
            dt, shape, strides, offset = layouts[which][index]
            isz = dt.itemsize
            how = _VIEW
            if strides == (1,) and offset == 0:
                how = _FRESH if which == 1 else _WHOLE
            byte_strides = tuple(isz * s for s in strides)
            nbytes = shape[0] * isz if how != _VIEW else -1
            rule = (k, which, index, how, nbytes, shape, dt.numpy, offset * isz, byte_strides)
            rules.append(rule)
        self.views = tuple(rules)


class CpuReplay(OpReplay):
    """A recorded CPU op call, replayed: guard, outputs, views, one call per launch."""

    __slots__ = ("_arrays", "_launches", "_typed")
    runtime: CpuRuntime

    def __init__(self, runtime: CpuRuntime, rec: OpRecording) -> None:
        records: list[Any] = rec.launches  # the seam's LaunchRecord or a JitLaunchRecord
        super().__init__(runtime, rec, tuple(records))
        layouts = (  # (a jit session's launch recording has scalars among its inputs)
            [
                (t.dtype, t.shape, t.strides, t.offset) if type(t) is Tensor else None
                for t in rec.inputs
            ],
            [(t.dtype, t.shape, t.strides, t.offset) for t in rec.outputs],
        )
        n = len(rec.inputs)
        self._launches = tuple(
            _DslLaunch(r, n) if type(r) is JitLaunchRecord else _Launch(r, layouts) for r in records
        )
        #: (input, numpy dtype) a DSL launch reads its storage as: the full path refuses another
        self._typed = tuple(
            {typed for r in self._launches if type(r) is _DslLaunch for typed in r.typed}
        )
        #: whether every launch is a ufunc's on positional arrays: what the compiled core runs,
        #: and :meth:`launch_buffers` on a framework's arrays
        self._arrays = all(type(r) is _Launch and r.plain for r in self._launches)
        if UfuncCore is not None and self._arrays:
            self.core = self._compiled()

    def _compiled(self) -> Any:
        """The compiled core of this replay: its outputs and its ufunc calls (plain ones)."""
        outputs = tuple(
            (allocate, nbytes, nbytes // layout[0].itemsize, layout[0].numpy, layout[:3])
            for (allocate, layout), (nbytes, _) in zip(self._allocators, self.outputs, strict=True)
        )
        launches = tuple(
            (r.fn, r.bare, [*r.template], r.views) for r in self._launches if type(r) is _Launch
        )
        read = {v[2] for r in launches for v in r[3] if v[1] == 0} | set(self.exclusive)
        runtime = self.runtime
        return UfuncCore(
            runtime, CpuStorage, np.empty, np.ndarray, type(runtime), _raise_failed, outputs,
            self.exclusive, tuple(sorted(read)), launches,
        )  # fmt: skip

    def __call__(self, tensors: tuple[Any, ...]) -> Any:
        for i in self.exclusive:
            if tensors[i].storage.read_only:
                return REPLAY_MISS  # the full path raises the typed error
        for i, npdt in self._typed:
            if tensors[i].storage.array.dtype is not npdt:
                return REPLAY_MISS
        outs: list[Any] = self.allocate() if self.outputs else []  # a launch plan has none
        for launch in self._launches:
            if type(launch) is _DslLaunch:  # final classes: mypy narrows both branches
                launch((*tensors, *outs))  # its dtypes were checked above: it runs
                continue
            args = [*launch.template]
            bare = launch.bare
            for k, which, index, how, nbytes, shape, npdt, offset, strides in launch.views:
                storage = (outs if which else tensors)[index].storage
                array = storage.array  # flat, of its allocating tensor's dtype
                if how == _FRESH or (
                    how == _WHOLE and storage.nbytes == nbytes and array.dtype is npdt
                ):
                    args[k] = array if bare else array.view()
                else:
                    args[k] = np.ndarray(shape, npdt, array, offset, strides)
            fn = launch.fn
            try:
                if launch.plain:  # a ufunc's arguments and its one output, all positional
                    fn(*args)
                else:
                    npos, nout = launch.npos, launch.nout
                    out = tuple(args[-nout:]) if launch.several else args[-1]
                    named = dict(zip(launch.names, args[npos:-nout], strict=True))
                    fn(*args[:npos], out=out, **named)
            except TenferroError:
                raise
            except Exception as exc:
                raise launch_failed(fn, exc) from exc
        return tuple(outs) if self.several else outs[0]

    def launch_buffers(self, inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> bool:
        if not self._arrays:  # (a DSL launch runs the interpreter on host tensors)
            return False
        for launch in cast("tuple[_Launch, ...]", self._launches):
            args = [*launch.template]
            for k, which, index, *_ in launch.views:
                args[k] = (outputs if which else inputs)[index]  # the slot's whole tensor
            try:
                launch.fn(*args)  # (plain: a ufunc's arguments and its output, positional)
            except Exception as exc:
                _raise_failed(launch.fn, exc)
        return True


def _raise_failed(fn: Any, exc: Exception) -> None:
    """What the compiled core raises for a launch that raised ``exc`` (as ``__call__`` does)."""
    if isinstance(exc, TenferroError):
        raise exc
    raise launch_failed(fn, exc) from exc


__all__ = ["CpuReplay", "DslForm"]

"""The CPU exec session and its launch seam: numpy work an op call can record and replay.

A CPU variant may compute with bare numpy on :meth:`CpuRuntime.strided_view` views; that always
works, on the full path. Written against the seam instead — outputs from ``ex.alloc_output``,
numpy work through ``ex.launch(fn, *args, out=...)`` — an op call is a recording like a CUDA
launch: ``fn`` and each argument as an input or output slot or a constant, which
``provider._op_plan`` plans and :mod:`._replay` re-runs without the variant.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> x = cpu.upload(np.arange(3, dtype=np.float32))
>>> with cpu.session() as s:
...     ex = tf.cpu.exec_session(s)
...     out = ex.alloc_output(x.dtype, x.shape)
...     ex.launch(np.multiply, x, 2, out=out)
>>> out.download().tolist()
[0.0, 2.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from typing import Any

from .. import LaunchError, TenferroError, Tensor, ValidationError
from ..provider import (
    RECORDING,
    ExecSession,
    OpRecording,
    OutputSession,
    require_resident,
    require_writable,
)
from ._storage import numpy_view

#: A recorded argument: a tensor's ``Slot`` ((0, i) input i, (1, j) output j), or (2, value) a
#: constant.
Arg = tuple[int, Any]
#: One recorded launch: (fn, positional args, keyword args, out args, out given as a tuple).
LaunchRecord = tuple[
    Callable[..., Any], tuple[Arg, ...], tuple[tuple[str, Arg], ...], tuple[Arg, ...], bool
]


class CpuExecSession(ExecSession, OutputSession):
    """``tf.cpu.exec_session(s)``: the base exec session plus the CPU launch seam (outputs from
    :meth:`alloc_output`)."""

    def launch(self, fn: Callable[..., Any], *args: Any, out: Any, **kwargs: Any) -> None:
        """Call ``fn(*views, out=views, **kwargs)``: each Tensor among ``args``, ``kwargs`` and
        ``out`` (one tensor or a tuple) as its numpy view, anything else as it is.

        ``fn`` — a ufunc (``np.add``) or a function of that form — writes ``out`` and touches
        nothing else; its result is dropped. What it raises comes back as a ``LaunchError``.
        """
        if self._owner != get_ident():
            raise self._refusal()
        if not callable(fn):
            raise ValidationError(
                f"ex.launch needs a callable (a numpy ufunc or a function), got {fn!r}",
                argument="fn",
            )
        domain = self.runtime.domain
        several = type(out) is tuple
        outs = out if several else (out,)
        if not outs:
            raise ValidationError("ex.launch needs at least one output tensor", argument="out")
        out_views = []
        for i, t in enumerate(outs):
            if type(t) is not Tensor or t.storage.domain is not domain or t.storage.read_only:
                self._refuse_operand(t, f"out[{i}]" if several else "out", True)
            out_views.append(numpy_view(t))
        views = [*args]
        for i, a in enumerate(args):
            if type(a) is Tensor and a.storage.domain is domain:
                views[i] = numpy_view(a)
            elif isinstance(a, Tensor):
                views[i] = numpy_view(self._refuse_operand(a, f"args[{i}]", False))
        named = kwargs
        for k, v in kwargs.items():
            if isinstance(v, Tensor):
                named = dict(named) if named is kwargs else named
                named[k] = numpy_view(self._refuse_operand(v, k, False))
        _call(fn, views, tuple(out_views) if several else out_views[0], named)
        rec = RECORDING.rec
        if rec is not None:
            _record(rec, fn, args, kwargs, outs, several)

    def _refuse_operand(self, t: Any, argument: str, written: bool) -> Tensor:
        """The typed error of an operand that is not a (writable) tensor of this runtime, or
        ``t`` when it is one after all (a domain equal but not identical)."""
        t = require_resident(self.runtime, t, argument=argument, op=None)
        if written:
            require_writable(t, f"{argument} of ex.launch is written", argument)
        return t


def _call(fn: Callable[..., Any], args: list[Any], out: Any, kwargs: dict[str, Any]) -> None:
    """Run one launch; what ``fn`` raises (a numpy error: shapes, casting) becomes typed."""
    try:
        fn(*args, out=out, **kwargs)
    except TenferroError:
        raise
    except Exception as exc:
        raise launch_failed(fn, exc) from exc


def launch_failed(fn: Callable[..., Any], exc: Exception) -> LaunchError:
    """The typed error of a launch whose function raised ``exc`` (full path and replay)."""
    name = getattr(fn, "__name__", type(fn).__name__)
    return LaunchError(
        f"ex.launch({name}, ...) raised {type(exc).__name__}: {exc}; check the arguments the "
        "variant passes (shapes, dtypes, out)"
    )


def _record(
    rec: OpRecording,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    outs: tuple[Any, ...],
    several: bool,
) -> None:
    """Add this launch to the op call's recording, or refuse it (the first reason is kept)."""
    try:
        positional = tuple(_arg(rec, a, False) for a in args)
        named = tuple((k, _arg(rec, v, False)) for k, v in kwargs.items())
        written = tuple(_arg(rec, t, True) for t in outs)
    except _UnreplayableError as why:
        rec.refuse(str(why))
        return
    rec.launches.append((fn, positional, named, written, several))


class _UnreplayableError(Exception):
    """What makes a launch argument impossible to replay."""


def _arg(rec: OpRecording, value: Any, exclusive: bool) -> Arg:
    if isinstance(value, Tensor):
        slot = rec.slot(value, exclusive)
        if slot is None or not value.numel:
            raise _UnreplayableError("a launch argument is not a non-empty input or output tensor")
        return slot
    try:
        hash(value)
    except TypeError:
        raise _UnreplayableError(
            f"a launch argument is a {type(value).__name__}, not a tensor or a hashable constant"
        ) from None
    # the type and repr too: 1, 1.0 and True are equal, so are 0.0 and -0.0
    return (2, (type(value), value, repr(value)))


__all__ = ["Arg", "CpuExecSession", "LaunchRecord", "launch_failed"]

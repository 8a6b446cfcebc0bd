"""The compiled planned call: an op handle's key, guard and replay in C, where it is built.

``_ccall`` (``_ccall.c``, an optional extension that ``scripts/setup`` and the wheel build) does
per call what :meth:`PlanTable.find <._plan_table.PlanTable.find>` and a backend's
:class:`~._op_replay.OpReplay` do in Python: the key, the lookup, and for a replay with a
compiled ``core`` (CPU and CUDA build one) the guard, the outputs and the launches. The Python
code stays the reference and the fallback: a replay's core answers :data:`FALLBACK` for what
it does not cover (a framework's allocator, another current context) and the replay's own
``__call__`` runs; a call not planned comes back as :class:`Unplanned`. A device storage's
finalizer (``DeviceStorage.__del__``) is compiled too: one append to the deferred queue.
Without the extension,
or with ``TENFERRO_COMPILED_CALL=0``, :data:`CALL` is None and every call takes the Python
path; :data:`STATE` says which, and why (``tenferro-host caps``).
"""

from __future__ import annotations

import hashlib
import operator
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from ..tensor import Tensor
from ._deferred import DeviceStorage
from ._op_plan import REPLAY_MISS, exact_kind
from ._op_replay import OpReplay
from ._plan_table import BLOCKED, UNHASHABLE, Learning
from ._session import thread_token
from ._storage import Storage

#: The environment switch: ``TENFERRO_COMPILED_CALL=0`` forces the pure-Python call.
SWITCH = "TENFERRO_COMPILED_CALL"
#: A core's answer for what only the replay's Python ``__call__`` does.
FALLBACK: Any = object()


class Unplanned(tuple[Any, Any]):
    """``(key, state)`` of a call the compiled call did not complete: the handle's Python path
    takes it from there (a replay whose guard failed comes back with the state ``BLOCKED``:
    the full path)."""

    __slots__ = ()


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(SWITCH, "1") == "0":
        return None, f"pure Python ({SWITCH}=0)"
    try:
        from . import _ccall
    except ImportError as exc:
        return None, f"pure Python (the extension is not built: {exc}; scripts/setup builds it)"
    sources = [Path(__file__).with_name(n) for n in ("_ccall.c", "_ccall_xla.c")]
    if all(s.exists() for s in sources):  # (a wheel carries the module, not its sources)
        built = hashlib.sha256(b"".join(s.read_bytes() for s in sources)).hexdigest()[:16]
        if built != _ccall.SOURCE_HASH:
            return None, "pure Python (the extension was built from other sources: re-run setup)"
    _ccall.configure(
        Tensor,
        Storage,
        OpReplay,
        Learning,
        BLOCKED,
        UNHASHABLE,
        REPLAY_MISS,
        FALLBACK,
        Unplanned,
        exact_kind,
        thread_token,
    )
    # a storage's finalizer runs per output that dies: one append, now without a Python frame
    DeviceStorage.__del__ = _ccall.finalizer(DeviceStorage)  # type: ignore[method-assign]
    return _ccall, "compiled"


_MODULE, STATE = _load()
#: ``call(plans, tensors, attrs)``: the result, or :class:`Unplanned`; None: the Python path.
CALL: Any = None if _MODULE is None else _MODULE.call
#: ``replay(plan, tensors)``: a planned call's replay, through its core where it has one (the
#: capture's and the jit session's roads); without the extension ``plan(tensors)``, in C too.
REPLAY: Any = operator.call if _MODULE is None else _MODULE.replay
#: ``find(plans, tensors, attrs)``: ``PlanTable.find`` compiled (None without the extension).
FIND: Any = None if _MODULE is None else _MODULE.find
#: The cores a backend's replay builds (None without the extension: no core).
DriverLaunchCore: Any = None if _MODULE is None else _MODULE.DriverLaunchCore
#: A captured graph's replay through a native CUDA graph, compiled (the launcher's ``core``).
GraphLaunchCore: Any = None if _MODULE is None else _MODULE.GraphLaunchCore
UfuncCore: Any = None if _MODULE is None else _MODULE.UfuncCore
#: ``order_streams(record, wait, event, waiter, signaller)``: one stream waits for another's work
#: through the driver's entry points at those addresses, in one call (None: ctypes per entry).
order_streams: Any = None if _MODULE is None else _MODULE.order_streams
#: The extension itself, for the XLA FFI entry it also holds (``interop._xla_ffi``), or None.
COMPILED = _MODULE


#: (class, method name) -> the Python method a compiled one replaced (the reference).
PYTHON_METHODS: dict[tuple[type, str], Any] = {}


def compiled_method(cls: type, name: str, *handed_over: Any) -> None:
    """Replace ``cls``'s method ``name`` (``OpHandle.__call__``, ``Host.run``) by its compiled
    form where the extension is: a planned call with tensors only replays without the method's
    Python frame; everything else runs the Python method, which stays the reference."""
    if _MODULE is not None:
        python = PYTHON_METHODS[cls, name] = getattr(cls, name)
        maker = _MODULE.handle_method if name == "__call__" else _MODULE.run_method
        setattr(cls, name, maker(cls, python, *handed_over))


__all__ = ["FALLBACK", "DriverLaunchCore", "GraphLaunchCore", "UfuncCore", "order_streams"]

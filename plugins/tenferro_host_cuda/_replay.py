"""The CUDA op replay: a recorded op call (raw or DSL) re-enqueued with ``cuLaunchKernel``.

The raw seam records each launch of an op call as (op, function, config, pointer slots,
constants); :class:`RawReplay` keeps, per launch, a pre-packed parameter block — an ``array``
of 8-byte words the driver reads (never an immutable object) and the array of pointers to them
— so a call writes the slots (its tensors' addresses) and makes one driver call per launch,
through the driver's entry point with every argument a prebuilt ctypes object (the block's
address never changes: nothing is converted per call).
A replay holds its functions, and so their modules, for as long as it is planned; launches in
flight are covered as always (a module is unloaded behind an event recorded after its last
reference went). Errors follow the launch fault rules (a sticky fault poisons the context). The
blocks are written per call, so a replay runs on the thread that recorded it (another thread
takes the full path); the driver copies the parameters at the call, so rewriting them for the
next call never races a launch in flight.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Callable
from functools import partial
from threading import get_ident as _get_ident
from typing import TYPE_CHECKING, Any

from tenferro_host import LaunchError
from tenferro_host.provider import REPLAY_MISS, DriverLaunchCore, OpRecording, OpReplay

from ._driver import POISONED, address, entry, failure
from ._launch import where
from ._storage import CudaStorage

if TYPE_CHECKING:
    from ._args import LaunchConfig
    from ._module import Function
    from ._runtime import CudaRuntime

#: One recorded launch: (op, function, config, pointer slots (param, 0 input / 1 output,
#: index, byte offset), constants (param, value bytes)).
LaunchRecord = tuple[
    str, "Function", "LaunchConfig", tuple[tuple[int, int, int, int], ...], tuple[Any, ...]
]


class _Packed:
    """One launch with its parameter block packed: constants written once, slots per call."""

    __slots__ = ("address", "args", "config", "function", "op", "pointers", "slots", "words")

    def __init__(self, record: LaunchRecord, nparams: int, stream: int) -> None:
        self.op, self.function, self.config, self.slots, consts = record
        n = max(nparams, 1)
        # array.array, not numpy: a slot write is an item assignment (numpy's costs 4x), and
        # neither is ever resized, so the addresses the driver reads stay put
        words = array("Q", bytes(8 * n))
        raw = memoryview(words).cast("B")
        for index, data in consts:
            raw[8 * index : 8 * index + len(data)] = data
        base = words.buffer_info()[0]
        self.pointers = array("Q", [base + 8 * i for i in range(n)])
        self.address = self.pointers.buffer_info()[0] if nparams else 0
        c = self.config
        #: cuLaunchKernel's arguments, as C values; the block (``words``) is written per call
        self.args = (
            ctypes.c_void_p(int(self.function.handle)),
            *map(ctypes.c_uint, (*c.grid, *c.block, c.shared_mem_bytes)),
            ctypes.c_void_p(stream),
            ctypes.c_void_p(self.address or None),
            None,  # extra
        )
        self.words = words


class RawReplay(OpReplay):
    """A recorded CUDA op call, replayed: guard, outputs, slot writes, ``cuLaunchKernel``."""

    __slots__ = ("_context", "_cu_current", "_cu_launch", "_launches", "_thread")
    runtime: CudaRuntime

    def __init__(self, runtime: CudaRuntime, rec: OpRecording) -> None:
        records: list[LaunchRecord] = rec.launches
        super().__init__(runtime, rec, tuple(records))
        self._thread = _get_ident()  # its parameter blocks are written per call: one thread
        d = runtime.driver
        self._cu_launch, self._cu_current = entry("cuLaunchKernel", d), d.cuCtxGetCurrent
        self._context = int(runtime.primary.handle)
        stream = int(runtime._stream)
        self._launches = tuple(_Packed(r, len(r[1].param_sizes), stream) for r in records)
        if DriverLaunchCore is not None:
            self.core = self._compiled(stream)

    def _compiled(self, stream: int) -> Any:
        """The compiled core of this replay: the same guard, outputs, blocks and launches, the
        launch and the context check through the driver's entry points (its own copy of each
        parameter block: the Python replay's stays its own)."""
        rt = self.runtime
        outputs = tuple(
            (allocate, nbytes, rt.blocks.size_class(nbytes), layout[:3])
            for (allocate, layout), (nbytes, _) in zip(self._allocators, self.outputs, strict=True)
        )
        launches = tuple(
            (
                int(p.function.handle),
                tuple(p.config.grid),
                tuple(p.config.block),
                p.config.shared_mem_bytes,
                stream,
                p.words.tobytes(),
                p.slots,
            )
            for p in self._launches
        )
        read = {index for p in self._launches for _, which, index, _ in p.slots if which == 0}
        # (each failure callable holds its launch's function, and so its module, as the core
        # lives: a core called on its own never launches an unloaded function)
        fails = tuple(partial(_launch_failure, rt, p) for p in self._launches)
        return DriverLaunchCore(
            rt, CudaStorage, self._context, address(entry("cuCtxGetCurrent", rt.driver)),
            address(entry("cuCtxSetCurrent", rt.driver)), address(self._cu_launch),
            self._thread, outputs, self.exclusive,
            tuple(sorted(read | set(self.exclusive))), fails, launches,
        )  # fmt: skip

    def __call__(self, tensors: tuple[Any, ...], outputs: tuple[int, ...] | None = None) -> Any:
        """The replay of ``tensors``; with ``outputs`` (device addresses of outputs the caller
        allocated), ``tensors`` are the inputs' addresses and a launch answers True: the
        Python path of :meth:`launch_buffers`, in the same frame."""
        rt = self.runtime
        if (
            rt.closed
            or POISONED
            or rt.debug_sync
            or rt.retirement.refuse_wait is not None  # a capture holds it: no block reused
            or _get_ident() != self._thread
        ):
            return REPLAY_MISS  # the full path raises (or waits and attributes) as it always does
        outs: Any = outputs
        if outputs is None:
            for i in self.exclusive:  # (an aliased one was keyed apart, and refused when recorded)
                if tensors[i].storage.read_only:
                    return REPLAY_MISS
            outs = self.allocate() if self.outputs else []  # a launch plan has none
        launch = self._cu_launch
        err, current = self._cu_current()  # PrimaryContext.enter's check, inline
        saved = rt.primary.enter() if err or int(current) != self._context else None
        try:
            for packed in self._launches:
                words = packed.words
                for param, which, index, delta in packed.slots:
                    t: Any = tensors[index] if which == 0 else outs[index]
                    words[param] = (t.storage.ptr if outputs is None else t) + delta
                err = launch(*packed.args)
                if err:
                    raise self._failed(err, packed)
        finally:
            if saved is not None:
                rt.primary.exit(saved)
        if outputs is not None:
            return True
        return tuple(outs) if self.several else outs[0]

    def launch_buffers(self, inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> bool:
        core = self.core
        if core is not None:
            return bool(core.launch_pointers(inputs, outputs))
        return self(inputs, outputs) is True

    def steps(self, tensors: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
        """Each step of a replay of ``tensors`` on its own, for the bench (a kept output is
        written into the first launch's block, so the launch step launches valid work)."""
        packed = self._launches[0]
        launch, args = self._cu_launch, packed.args
        words, slots = packed.words, packed.slots
        kept = self.allocate()

        def slot_writes() -> None:
            for param, which, index, delta in slots:
                t: Any = tensors[index] if which == 0 else kept[index]
                words[param] = t.storage.ptr + delta

        slot_writes()
        return super().steps(tensors) | {
            "enter/exit": self._cu_current,
            "slot writes": slot_writes,
            "launch": lambda: launch(*args),
        }

    def _failed(self, err: Any, packed: _Packed) -> Exception:
        return _launch_failure(self.runtime, packed, err)


def _launch_failure(runtime: CudaRuntime, packed: _Packed, err: Any) -> Exception:
    """The typed error of a launch of ``packed`` that answered ``err`` (the fault rules)."""
    at = where(packed.op, packed.function, packed.config)
    return failure(err, f"launching {at}", uuid=runtime.uuid_bytes, op=packed.op, error=LaunchError)


__all__ = ["LaunchRecord", "RawReplay"]

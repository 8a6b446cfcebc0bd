"""The backends an op-plan test runs on, behind one face: those of a behaviour test
(:mod:`support.backends`: the CPU, WebGPU where wgpu finds an adapter) and the CUDA stand-in
(:mod:`support.driver_stand_in`: the CUDA plugin's plans without a GPU).

A behaviour test takes the ``backend`` fixture (:func:`backend_fixture`) and asks it for tensors
of a dtype and shape and for what a call did on either path (:meth:`PlanBackend.observe`): on the
CPU and WebGPU every output's and input's bytes, on the stand-in every launch normalized (kernel,
grid, block, each argument as a tensor and byte offset or a masked constant), since it has no
memory to read. Plans are on in every backend (``TENFERRO_OP_PLAN`` switches them off for the
suite's second pass; these tests compare both paths themselves).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from tenferro_host_cuda._gather import GATHER_CODES

import tenferro_host as tf
from support.backends import BEHAVIOUR_KINDS, available_host, kind_params
from support.driver_stand_in import (
    ADD,
    ADD_PARAMS,
    StandIn,
    launch_words,
    stand_in,
    stand_in_module,
)
from tenferro_host.provider import _op_plan

#: the backends, by the name a test's id carries
BACKENDS = (*kind_params(*BEHAVIOUR_KINDS), "cuda-stand-in")
_SIZES = {"Q": 8, "q": 8, "i": 4}
#: one host per kind a run (WebGPU's adapter is made once); tests forget the plans they count
_shared_host = functools.cache(available_host)


class PlanBackend:
    """A host and one runtime of it, with tensors of values no other tensor of it has (a call
    that reads the wrong one gives another answer) and call outcomes."""

    def __init__(self, name: str, host: tf.Host, rt: Any) -> None:
        self.name, self.host, self.rt = name, host, rt
        self._made = 0

    def tensor(self, dt: str, shape: tuple[int, ...]) -> tf.Tensor:
        n = int(np.prod(shape))
        values = np.arange(self._made + 1, self._made + n + 1).reshape(shape).astype(dt)
        self._made += n
        return self.rt.upload(values)

    def register(self, package: str, *specs: tf.OpSpec) -> None:
        """Add the ops of ``specs`` this host does not have yet (the WebGPU host is shared)."""
        missing = [s for s in specs if s.name not in self.host.registry.ops]
        if missing:
            view = self.host.registry.staging(package)
            for spec in missing:
                view.add_op(spec)
            view.commit()

    def observe(self, planned: bool, name: str, *tensors: Any, calls: int = 3) -> Any:
        """What the last of ``calls`` calls did, plans on or off: ("raised", type, message) or
        ("ran", what it left). Planned, two calls record and the third replays."""
        saved, _op_plan.ENABLED = _op_plan.ENABLED, planned
        try:
            for _ in range(calls):
                self.before_call()
                try:
                    out = self.host.run(name, *tensors)
                except tf.TenferroError as exc:
                    return ("raised", type(exc).__name__, str(exc))
        finally:
            _op_plan.ENABLED = saved
        return ("ran", self.outcome(out if isinstance(out, tuple) else (out,), tensors))

    def before_call(self) -> None:
        """Forget what the previous call left to observe."""

    def on_allocation(self, monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
        """Run ``hook`` whenever a call (a replay included) asks the runtime for an output."""
        cls = type(self.rt)
        allocate = cls._allocate

        def allocation(rt: Any, *args: Any) -> Any:
            hook()
            return allocate(rt, *args)

        monkeypatch.setattr(cls, "_allocate", allocation)  # (a replay binds it when made)

    def outcome(self, outs: tuple[Any, ...], tensors: tuple[Any, ...]) -> Any:
        """Every output's and input's layout and bytes after the call."""
        seen = (*outs, *tensors)
        return [(t.dtype.name, t.shape, t.strides, t.download().tobytes()) for t in seen]


class CpuPlanBackend(PlanBackend):
    """The CPU, whose compiled replay allocates without the runtime unless fresh memory is
    poisoned (the test kit's switch): then it asks the runtime, as the other backends do."""

    def on_allocation(self, monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
        super().on_allocation(monkeypatch, hook)
        monkeypatch.setattr(type(self.rt), "poison_fresh_memory", True)


class CudaStandInBackend(PlanBackend):
    """The stand-in runtime with the add module, the gather of canonicalize and the launches
    recorded: a call's outcome is its output's layout and its launches, normalized."""

    def __init__(self, base: StandIn) -> None:
        super().__init__("cuda-stand-in", base.host, base.rt)
        self.fake, self.launches, self.module = base.fake, base.launches, base.module
        gather = stand_in_module(base.rt, tuple(_SIZES[c] for c in GATHER_CODES))
        base.rt.gather.module = gather
        base.rt.gather.functions = {n: gather.function(f"gather_{n}") for n in (2, 4, 8)}

    def tensor(self, dt: str, shape: tuple[int, ...]) -> tf.Tensor:
        return self.rt.empty(dt, shape)  # the stand-in has no memory to upload into

    def before_call(self) -> None:
        self.fake.calls.clear()
        self.launches.clear()

    def on_allocation(self, monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
        cls = type(self.rt)
        allocate_block = cls.allocate_block

        def allocation(rt: Any, *args: Any, **kwargs: Any) -> Any:
            hook()
            return allocate_block(rt, *args, **kwargs)

        monkeypatch.setattr(cls, "allocate_block", allocation)  # (a replay binds it when made)
        self.fake.copy_words = True  # a replay's parameter block may go with its plan

    def outcome(self, outs: tuple[Any, ...], tensors: tuple[Any, ...]) -> Any:
        layouts = [(t.dtype.name, t.shape, t.strides) for t in outs]
        return layouts, self.normalized([*tensors, *outs])

    def names(self) -> dict[Any, str]:
        """Kernel names by handle (replays) and by cuda.core kernel (the full path)."""
        out = {}
        for module in (self.module, self.rt.gather.module):
            for name, fn in module._functions.items():
                out[fn.handle] = out[fn.core_kernel] = name
        return out

    def normalized(self, known: list[Any]) -> list[Any]:
        """Every launch since the last call began, its arguments as ``known`` tensors' offsets."""
        names = self.names()
        done = []
        for _stream, config, kernel, *args in self.launches:
            sizes = [8] * len(args)
            done.append((names[kernel], config.grid, config.block, _args(args, sizes, known)))
        for call, arg in self.fake.calls:
            if call == "cuLaunchKernel":
                handle, grid, block, _shared, views = arg
                words = launch_words(views)
                sizes = self._sizes(handle, len(words))
                done.append((names[handle], grid, block, _args(words, sizes, known)))
        return done

    def _sizes(self, handle: Any, n: int) -> list[int]:
        for module in (self.module, self.rt.gather.module):
            for fn in module._functions.values():
                if fn.handle == handle:
                    return list(fn.param_sizes)
        return [8] * n


def _args(values: list[Any], sizes: list[int], known: list[Any]) -> list[Any]:
    """Each launch argument as ("ptr", tensor index, byte offset) or ("const", its bytes)."""
    out: list[Any] = []
    for value, size in zip(values, sizes, strict=True):
        v = int(value)
        where = next(
            (
                (i, v - t.storage.ptr)
                for i, t in enumerate(known)
                if t.numel and size == 8 and 0 <= v - t.storage.ptr < t.storage.nbytes
            ),
            None,
        )
        out.append(("ptr", *where) if where else ("const", v & ((1 << (8 * size)) - 1)))
    return out


@contextmanager
def plan_backend(name: str) -> Iterator[PlanBackend]:
    """The backend ``name`` of :data:`BACKENDS` for the block (skipped where it cannot run)."""
    if name == "cuda-stand-in":
        with stand_in() as base:
            yield CudaStandInBackend(base)
        return
    if name == "cpu":
        host = tf.Host()
        yield CpuPlanBackend(name, host, host.backend(name))
        return
    host = _shared_host(name)
    yield PlanBackend(name, host, host.backend(name))


def backend_fixture() -> Callable[..., Any]:
    """A test module's ``backend`` fixture: each test once per backend, plans on."""

    @pytest.fixture(params=BACKENDS)
    def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
        monkeypatch.setattr(_op_plan, "ENABLED", True)
        with plan_backend(request.param) as made:
            yield made

    return backend


__all__ = [
    "ADD",
    "ADD_PARAMS",
    "BACKENDS",
    "CpuPlanBackend",
    "CudaStandInBackend",
    "PlanBackend",
    "backend_fixture",
]

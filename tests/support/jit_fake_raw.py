"""A CPU double of the raw CUDA seam, so the CUDA JIT session runs on machines without a GPU.

It has the raw session methods the JIT session uses (``tensor_strided``, ``tensor_strided_mut``,
``compile_nvrtc``, ``resource``, ``launch``) with the seam's borrow rules (an exclusive borrow
conflicts with any other borrow of the storage; a ref's borrow ends with the ref). A launch
decodes the packed arguments with the generated kernel's ABI (:func:`kernel_abi`) — pointer
element, u64 offset, u32 len/shape/strides, typed scalars, the hidden logical count — checks
each against the tensor it came from, and runs the specialization on the CPU interpreter over
CPU tensors. So the session's argument packing, borrows and caches are tested exactly, and only
the generated CUDA C is left to the GPU (and the launch plans, which replay what the real raw
seam records, to the driver stand-in).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from tenferro_host_cuda_jit import _jit as jit_session
from tenferro_host_cuda_jit._codegen import CudaKernelSource, kernel_abi

from tenferro_host import Tensor
from tenferro_host._cpu._interpreter import ArrayArg, run
from tenferro_host.cuda import raw
from tenferro_host.errors import AliasingError
from tenferro_host.kernel import Specialization, ir
from tenferro_host.provider import BackendSession, ExecSession, Session


@dataclass(frozen=True)
class FakeDeviceInfo:
    arch: str = "sm_90"
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_threads_per_block: int = 1024


class FakeRef:
    """A borrow: the pointer is storage element ``base``; the borrow ends with the ref."""

    def __init__(self, rs: FakeRawSession, t: Tensor, base: int, exclusive: bool) -> None:
        self.session = rs
        self.tensor = t
        self.base = base
        self.exclusive = exclusive
        self.released = False

    def __del__(self) -> None:
        if not self.released:
            self.session.unborrow(self.tensor.storage)


class FakeFunction:
    def __init__(self, spec: Specialization, symbol: str) -> None:
        self.spec = spec
        self.name = symbol


class FakeModule:
    def __init__(self, spec: Specialization, source: str) -> None:
        self.spec = spec
        self.nbytes = len(source)

    def function(self, symbol: str) -> FakeFunction:
        return FakeFunction(self.spec, symbol)


class FakeRuntimeState:
    """What outlives one raw session: the resource cache and the counters tests look at."""

    def __init__(self) -> None:
        self.resources: dict[Hashable, Any] = {}
        self.compiles = 0
        self.launches = 0
        self.sources: dict[str, Specialization] = {}  # generated source -> its specialization


class FakeRawSession(Session):
    kind_name = "raw session"

    def __init__(self, ex: FakeCudaExecSession, op: str) -> None:
        super().__init__(ex.runtime, op, parent=ex)
        self.state = ex.state
        self.borrows: dict[Any, int] = {}

    def borrow(self, t: Tensor, exclusive: bool) -> None:
        held = self.borrows.get(t.storage)
        if held is not None and (held < 0 or exclusive):
            raise AliasingError("conflicting borrow of one storage", argument="t", op=self.op)
        self.borrows[t.storage] = -1 if exclusive else (held or 0) + 1

    def unborrow(self, storage: Any) -> None:
        held = self.borrows.get(storage)
        if held is not None:
            if held <= 1:
                del self.borrows[storage]
            else:
                self.borrows[storage] = held - 1

    def release(self, ref: FakeRef) -> None:
        """As the raw seam's: end the borrow now, whoever still holds the ref."""
        self._check()
        if not ref.released:
            ref.released = True
            self.unborrow(ref.tensor.storage)

    def tensor_strided(self, t: Tensor) -> FakeRef:
        self._check()
        self.borrow(t, False)
        return FakeRef(self, t, 0, False)

    def tensor_strided_mut(self, t: Tensor) -> FakeRef:
        self._check()
        self.borrow(t, True)
        return FakeRef(self, t, 0, True)

    def compile_nvrtc(self, source: str) -> FakeModule:
        self._check()
        self.state.compiles += 1
        return FakeModule(self.state.sources[source], source)

    def resource(self, key: Hashable, init: Callable[[], Any], nbytes: int | None = None) -> Any:
        self._check()
        if key not in self.state.resources:
            self.state.resources[key] = init()
        return self.state.resources[key]

    def launch(self, function: FakeFunction, config: raw.LaunchConfig, args: list[Any]) -> None:
        self._check()
        self.state.launches += 1
        execute(function.spec, config, list(args), self)


def execute(
    spec: Specialization, config: raw.LaunchConfig, args: list[Any], rs: FakeRawSession
) -> None:
    """Decode ``args`` with the kernel ABI, check them, run ``spec`` on the interpreter."""
    pending = iter(args)
    arrays: dict[str, dict[str, Any]] = {}
    scalars: dict[str, Any] = {}
    count = [0, 0, 0]
    for p in kernel_abi(spec):
        value = next(pending)
        if p.role == "data":
            assert isinstance(value, FakeRef) and value.session is rs, value
            assert value.tensor.storage in rs.borrows, "launch with a released borrow"
            assert value.exclusive or p.param not in spec.ir.written, f"{p.param} written shared"
            arrays[p.param] = {"ref": value, "shape": [], "strides": []}
            continue
        assert type(value).__name__ == p.raw_type, (p.name, value)
        if p.role == "value":
            scalars[p.param] = value.value
        elif p.role == "count":
            count[p.axis] = value.value
        elif p.role in ("shape", "stride"):
            arrays[p.param]["shape" if p.role == "shape" else "strides"].append(value.value)
        else:
            arrays[p.param][p.role] = value.value
    assert next(pending, None) is None, "more arguments than the ABI has"
    grid = config.grid
    assert all(1 <= g <= m for g, m in zip(grid, FakeDeviceInfo.max_grid_dims, strict=True))
    assert math.prod(grid) >= math.prod(count), (grid, count)
    run_args: list[Any] = []
    for param in spec.params:
        if param.kind != "array":
            run_args.append(scalars[param.name])
            continue
        a = arrays[param.name]
        shape, strides = tuple(a["shape"]), tuple(a["strides"])
        assert a["len"] == math.prod(shape)
        storage = getattr(a["ref"].tensor.storage, "array", None)
        if storage is None:  # an empty tensor owns no memory
            storage = np.empty(0, param.dtype.numpy)
        run_args.append(ArrayArg(storage, a["ref"].base + a["offset"], shape, strides))
    # the launch asks for exactly the dynamic shared memory the kernel's arrays take
    _, dynamic = ir.dynamic_shared_layout(spec.ir, spec.ir.shared_sizes(run_args))
    assert config.shared_mem_bytes == dynamic, (config.shared_mem_bytes, dynamic)
    run(spec, (count[0], count[1], count[2]), config.block, run_args)


class FakeCudaExecSession(ExecSession):
    """An exec session of a CPU runtime that offers the fake raw seam and a CUDA device info."""

    def __init__(self, backend_session: BackendSession, state: FakeRuntimeState) -> None:
        super().__init__(backend_session)
        self.state = state

    @property
    def device_info(self) -> FakeDeviceInfo:
        return FakeDeviceInfo()

    def raw(self, op: str) -> FakeRawSession:
        self._check()
        return FakeRawSession(self, op)


@contextmanager
def recorded_sources(state: FakeRuntimeState) -> Iterator[None]:
    """Let the fake compiler find each generated source's specialization."""
    original = jit_session.generate

    def generate(spec: Specialization, grid: str = "folded") -> CudaKernelSource:
        source = original(spec, grid)
        state.sources[source.source] = spec
        return source

    jit_session.generate = generate  # type: ignore[assignment]
    try:
        yield
    finally:
        jit_session.generate = original  # type: ignore[assignment]


@contextmanager
def fake_cuda_jit(cpu: Any, state: FakeRuntimeState, op: str = "tests.cuda_jit") -> Iterator[Any]:
    """A CUDA JIT session over the fake raw seam on the CPU runtime ``cpu``."""
    with (
        recorded_sources(state),
        cpu.session() as s,
        FakeCudaExecSession(s, state) as ex,
        jit_session.CudaJitSession(ex, op) as js,
    ):
        yield js

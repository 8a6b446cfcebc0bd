"""The CUDA JIT session: ``ex.jit(op)`` on a CUDA exec session, built only on the raw seam.

The user API, the argument checks and the launch plans come from
:class:`tenferro_host.provider.JitSession` (identical on cpu, cuda and webgpu). What is CUDA's
own:

* the session holds ONE raw sub-session (``ex.raw(op)``), opened at its first launch that is
  not a plan's replay, until it ends; every launch is enqueued on the runtime's stream at once,
  so launches, raw work and downloads are ordered by submission — there is no host-side batch;
* each specialization is generated as CUDA C (:mod:`._codegen`), compiled once by NVRTC for the
  live device's ``sm_XY`` (``features``) and cached per runtime with ``rs.resource``;
* a launch packs its arguments in the generated kernel's ABI order — per array the ref of its
  storage (element 0: any view of it may be read or written, aliased views too), its offset,
  element count, shape and strides; each scalar typed; the logical cube count — and enqueues
  them with ``rs.launch``. A storage is borrowed for the launch: exclusively when the kernel
  writes any view of it, else shared. The raw seam records the launch while an op call or a
  launch key is recorded, so a planned launch is the runtime's op replay: slot writes and one
  ``cuLaunchKernel`` (``tenferro_host_cuda``'s ``_replay.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tenferro_host import Tensor
from tenferro_host.cuda import raw
from tenferro_host.kernel import Specialization, ir
from tenferro_host.provider import (
    Grid,
    JitLaunch,
    JitSession,
    Memo,
    memo,
)

from ._codegen import generate, grid_shape, kernel_abi, kernel_symbol


class _Layout:
    """What a specialization's ABI asks of a launch, derived once per specialization and shared
    by every session of every runtime (it depends on the specialization alone)."""

    __slots__ = ("slots", "written")

    def __init__(self, spec: Specialization) -> None:
        index = {p.name: i for i, p in enumerate(spec.params)}
        #: per runtime parameter in ABI order: (index in the arguments, the raw typed-scalar
        #: class of a scalar, None for an array)
        self.slots = tuple(
            (index[a.param], getattr(raw, a.raw_type) if a.role == "value" else None)
            for a in kernel_abi(spec)
            if a.role in ("data", "value") and a.param is not None
        )
        #: the indices of the arrays the kernel writes
        self.written = tuple(index[name] for name in spec.ir.written if name in index)


#: Immutable launch pieces shared by all sessions: layouts by specialization key, configs and
#: hidden-count scalars by launch shape, view metadata scalars by view.
MAX_SHARED = 4096
_LAYOUTS: Memo[Any, _Layout] = memo("cuda_jit.layouts", MAX_SHARED, what="ABI layouts")
_SHAPES: Memo[Any, tuple[Any, tuple[Any, ...]]] = memo(
    "cuda_jit.shapes", MAX_SHARED, what="configs and counts by launch shape"
)
_METAS: Memo[Any, tuple[Any, ...]] = memo("cuda_jit.metas", MAX_SHARED, what="view metadata")


def _meta(t: Tensor) -> tuple[Any, ...]:
    """A view's offset, element count, shape and strides as the kernel's raw arguments."""
    return (
        raw.u64(t.offset),
        raw.u32(t.numel),
        *map(raw.u32, t.shape),
        *map(raw.u32, t.strides),
    )


class CudaJitSession(JitSession):
    """A DSL session on a CUDA runtime, launching through one raw sub-session."""

    target = "cuda"
    default_cube_dim = 256

    #: Test hook: a smaller per-dimension grid limit (x, y, z) than the device's, so that the fold
    #: of 1-D counts into 2-D/3-D grids is exercised at small sizes. None: the device's limits.
    max_grid_override: ClassVar[Grid | None] = None

    #: the raw sub-session, opened at the first launch that is not a plan's replay
    _rs: Any = None

    @property
    def _ex(self) -> Any:
        """The exec session the jit session was opened in (its parent)."""
        return self.parent

    #: the device's limits, read by the session's first full-path launch (a planned one asks none)
    _device_info: Any = None

    @property
    def _device(self) -> Any:
        info = self._device_info
        if info is None:
            info = self._device_info = self._ex.device_info
        return info

    # -- backend contract -------------------------------------------------------------------------
    @property
    def features(self) -> tuple[str, ...]:
        return (self._device.arch,)

    @property
    def max_grid(self) -> Grid:
        limits: Grid = self._device.max_grid_dims
        override = self.max_grid_override
        if override is None:
            return limits
        return (
            min(limits[0], override[0]),
            min(limits[1], override[1]),
            min(limits[2], override[2]),
        )

    @property
    def max_cube_threads(self) -> int:
        return int(self._device.max_threads_per_block)

    def _on_exit(self, error: BaseException | None) -> None:
        rs, self._rs = self._rs, None
        if rs is None:  # every launch replayed a plan: no raw session was needed
            return
        if error is None:
            rs.__exit__(None, None, None)
        else:
            rs.__exit__(type(error), error, error.__traceback__)

    def _dispatch(self, launch: JitLaunch) -> None:
        """Compile (cached per runtime), pack and enqueue: the raw seam records the launch."""
        spec = launch.spec
        layout = _LAYOUTS.get_or_make(spec.key, lambda: _Layout(spec))
        _, dynamic = ir.dynamic_shared_layout(spec.ir, launch.shared_sizes)
        config, counts = _SHAPES.get_or_make(
            (launch.grid, launch.dim, launch.count, dynamic),
            lambda: (
                raw.LaunchConfig(launch.grid, launch.dim, dynamic),
                tuple(map(raw.u32, launch.count)),
            ),
        )
        if self._rs is None:  # opened at the first launch that is not a plan's replay
            self._rs = self._ex.raw(self.op)
            self._rs.__enter__()
        function = self._function(spec, grid_shape(launch.count, launch.grid, launch.dim))
        self._rs.launch(function, config, self._pack(layout, launch.args, counts))

    def _function(self, spec: Specialization, grid: str) -> Any:
        """The compiled kernel of ``spec`` for the grid shape ``grid``; its module is cached per
        runtime (``rs.resource``, bounded, counted by image size) under the specialization key,
        which names the kernel, argument types, constants, target and device arch."""
        module = self._rs.resource(
            ("tenferro_host_cuda_jit", spec.key, grid),
            lambda: self._rs.compile_nvrtc(generate(spec, grid).source),
        )
        return module.function(kernel_symbol(spec))

    def _pack(self, layout: _Layout, values: tuple[Any, ...], counts: tuple[Any, ...]) -> list[Any]:
        """The raw argument list of one launch (checked arguments): refs, view metadata,
        scalars, the logical count. One borrow per storage, made before the others where
        written (the raw seam refuses a shared borrow beside an exclusive one)."""
        rs = self._rs
        refs: dict[Any, Any] = {}
        for i in layout.written:
            t = values[i]
            if t.storage not in refs:
                refs[t.storage] = rs.tensor_strided_mut(t)
        packed: list[Any] = []
        for i, scalar in layout.slots:
            value = values[i]
            if scalar is not None:
                packed.append(scalar(value))
                continue
            ref = refs.get(value.storage)
            if ref is None:
                ref = refs[value.storage] = rs.tensor_strided(value)
            packed.append(ref)
            view = (value.offset, value.shape, value.strides)
            meta = _METAS.get(view)
            if meta is None:
                meta = _METAS.put(view, _meta(value))
            packed.extend(meta)
        packed.extend(counts)
        return packed


__all__ = ["CudaJitSession"]

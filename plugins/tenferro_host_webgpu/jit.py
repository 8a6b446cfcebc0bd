"""The WebGPU JIT session: ``ex.jit(op)`` launches DSL kernels as WGSL compute dispatches.

Same API as the CPU and CUDA JIT sessions: ``binding(t)``, ``alloc_output(dtype, shape)``,
``cube_count_1d(n)``, ``cube_dim_1d()``, ``launch(kernel, count, dim, *args, **constants)``.
Dispatches are recorded into the runtime's pending encoder and submitted when the session ends
(or earlier, when a download or synchronize needs their results). Grids beyond the
per-dimension workgroup limit fold into 2-D/3-D dispatches; views bind with their offset,
shape and strides in the uniform block, so non-compact inputs give correct results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tenferro_host import dtypes
from tenferro_host.errors import (
    InvalidLaunchConfigError,
    LaunchError,
    UnsupportedError,
    ValidationError,
)
from tenferro_host.kernel import ArrayDesc, Kernel, ScalarDesc, Specialization
from tenferro_host.kernel.interpreter import U32_MAX, check_u32_array
from tenferro_host.provider import ExecSession, Session, SessionHandle, require_resident
from tenferro_host.tensor import Tensor

from . import wgsl
from .runtime import WebGpuRuntime, WebGpuStorage

DEFAULT_CUBE_DIM = 256
Grid = tuple[int, int, int]


class JitBinding(SessionHandle):
    """A tensor bound to a JIT session (any layout); valid inside the session only."""

    __slots__ = ("_tensor",)

    def __init__(self, session: Session, tensor: Tensor) -> None:
        super().__init__(session)
        self._tensor = tensor

    @property
    def tensor(self) -> Tensor:
        self._check()
        return self._tensor

    def __repr__(self) -> str:
        return f"JitBinding({self._tensor!r})"


def _grid(value: Any, what: str, op: str | None, *, allow_zero: bool) -> Grid:
    """An int or a 1-3 tuple of ints as (x, y, z)."""
    dims = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        dims = tuple(dims)
    except TypeError:
        dims = None
    low = 0 if allow_zero else 1
    if (
        dims is None
        or not 1 <= len(dims) <= 3
        or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= low
            for d in dims
        )
    ):
        kind = "non-negative" if allow_zero else "positive"
        raise InvalidLaunchConfigError(
            f"{what} must be an int or a tuple of 1 to 3 {kind} ints, got {value!r}",
            argument=what,
            op=op,
        )
    padded = (*map(int, dims), 1, 1)
    return (padded[0], padded[1], padded[2])


def _scalar(value: Any, dt: dtypes.DType, name: str, op: str | None) -> float | int | bool:
    """A Python/numpy scalar converted to the parameter's dtype, range-checked."""
    if isinstance(value, np.generic):
        value = value.item()
    if dt.name == "bool":
        if isinstance(value, bool):
            return value
    elif dt.is_float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(dt.numpy.type(value))
    elif isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dt.numpy)
        if info.min <= value <= info.max:
            return value
        raise ValidationError(
            f"scalar {name!r}={value} does not fit {dt.name} [{info.min}, {info.max}]",
            argument=name,
            op=op,
        )
    raise ValidationError(
        f"scalar {name!r} is {dt.name} but got {type(value).__name__} {value!r}; pass a "
        f"{'bool' if dt.name == 'bool' else dt.category} value",
        argument=name,
        op=op,
    )


class WebGpuJitSession(Session):
    """A DSL session on a WebGPU runtime; its dispatches are one batch, submitted at exit."""

    kind_name = "jit session"

    def __init__(self, ex: ExecSession, op: str) -> None:
        super().__init__(ex.runtime, op, parent=ex)
        assert isinstance(ex.runtime, WebGpuRuntime)
        self.webgpu: WebGpuRuntime = ex.runtime

    def __enter__(self) -> WebGpuJitSession:
        self._open()
        return self

    def _on_enter(self) -> None:
        self.webgpu.queue.hold()

    def _on_exit(self, error: BaseException | None) -> None:
        self.webgpu.queue.release()

    # -- handles --------------------------------------------------------------------------------
    def binding(self, t: Any) -> JitBinding:
        """Bind a tensor of this runtime (views included) for launches in this session."""
        self._check()
        tensor = require_resident(self.runtime, t, argument="t", op=self.op)
        return JitBinding(self, tensor)

    def alloc_output(self, dtype: Any, shape: Any) -> Tensor:
        """A fresh compact tensor of this runtime, uninitialised."""
        self._check()
        return self.runtime.empty(dtype, shape)

    def cube_dim_1d(self) -> Grid:
        """The default 1-D cube (workgroup) size."""
        self._check()
        limit = self.webgpu.device_info.max_compute_invocations_per_workgroup
        return (min(DEFAULT_CUBE_DIM, limit), 1, 1)

    def cube_count_1d(self, n: int) -> Grid:
        """Enough 1-D cubes of ``cube_dim_1d()`` for ``n`` threads (folded at launch)."""
        self._check()
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise InvalidLaunchConfigError(
                f"n must be a non-negative int, got {n!r}", argument="n", op=self.op
            )
        return (-(-int(n) // self.cube_dim_1d()[0]), 1, 1)

    # -- launch ---------------------------------------------------------------------------------
    def launch(self, kernel: Kernel, count: Any, dim: Any, *args: Any, **constants: Any) -> None:
        """Record one dispatch of ``kernel`` over ``count`` cubes of ``dim`` threads."""
        self._check()
        op = self.op
        if not isinstance(kernel, Kernel):
            raise ValidationError(
                f"launch takes a @K.kernel object, got {type(kernel).__name__}",
                argument="kernel",
                op=op,
            )
        count3 = _grid(count, "count", op, allow_zero=True)
        dim3 = _grid(dim, "dim", op, allow_zero=False)
        self._check_dim(dim3)
        values = [a.tensor if isinstance(a, JitBinding) else a for a in args]
        for i, v in enumerate(values):
            if isinstance(v, Tensor) or hasattr(v, "__array__") and not np.isscalar(v):
                require_resident(self.runtime, v, argument=f"argument {i}", op=op)
        spec = kernel.specialize(
            [
                ArrayDesc(v.dtype, v.ndim) if isinstance(v, Tensor) else ScalarDesc(
                    dtypes.dtype(v.dtype) if isinstance(v, np.generic) else None
                )
                for v in values
            ],
            constants,
            target="webgpu",
            features=("shader-f16",) if self.webgpu.device_info.shader_f16 else (),
        )
        self._check_features(spec)
        threads = math.prod(count3) * math.prod(dim3)
        if threads == 0:
            return
        if threads > U32_MAX + 1:
            raise UnsupportedError(
                f"a launch of {threads} threads exceeds the u32 range of ABSOLUTE_POS; split "
                "the work",
                backend=self.runtime.name,
                feature="more than 2^32 threads per launch",
                op=op,
            )
        views, buffers, groups = self._bind(spec, values)
        logical, physical = self.webgpu.grid(count3, op)
        folded = physical != logical
        pipeline = self.webgpu.pipelines.get(
            (kernel, spec.key, dim3, groups, folded),
            lambda: self._compile(spec, dim3, groups, folded),
            what=f"kernel {kernel.name!r}",
            locate=lambda line: wgsl.generate(spec, dim3, groups, folded).locate(line),
            op=op,
        )
        uniform = wgsl.pack_uniforms(spec, logical, physical, views)
        try:
            self.webgpu.dispatch(pipeline, uniform, buffers, physical)
        except self.webgpu.wgpu_errors as exc:
            raise LaunchError(
                f"WebGPU rejected the dispatch of kernel {kernel.name!r} (count {count3}, dim "
                f"{dim3}, workgroups {physical}): {exc}",
                op=op,
            ) from exc
        if self.webgpu.debug_sync:
            self.webgpu.debug_wait(f"kernel {kernel.name!r} (count {count3}, dim {dim3})", op)

    def _compile(
        self, spec: Specialization, dim: Grid, groups: tuple[int, ...], folded: bool
    ) -> tuple[str, tuple[bool, ...]]:
        program = wgsl.generate(spec, dim, groups, folded)
        return program.source, program.writable

    def _check_dim(self, dim: Grid) -> None:
        info = self.webgpu.device_info
        for axis, (d, limit) in enumerate(zip(dim, info.max_compute_workgroup_size, strict=True)):
            if d > limit:
                raise InvalidLaunchConfigError(
                    f"dim[{axis}]={d} exceeds the adapter's max_compute_workgroup_size "
                    f"{info.max_compute_workgroup_size}",
                    argument="dim",
                    op=self.op,
                )
        if math.prod(dim) > info.max_compute_invocations_per_workgroup:
            raise InvalidLaunchConfigError(
                f"dim {dim} has {math.prod(dim)} threads per cube; the adapter's "
                f"max_compute_invocations_per_workgroup is "
                f"{info.max_compute_invocations_per_workgroup}",
                argument="dim",
                op=self.op,
            )

    def _check_features(self, spec: Specialization) -> None:
        types = [p.dtype for p in spec.params] + [dt for _, dt in spec.ir.locals]
        for dt in types:
            wgsl.wgsl_type(dt, f"a value of kernel {spec.kernel_name!r}")
            if dt.name == "float16" and not self.webgpu.device_info.shader_f16:
                raise UnsupportedError(
                    f"kernel {spec.kernel_name!r} uses f16, but the adapter does not offer the "
                    "'shader-f16' feature; use f32 or another adapter",
                    backend=self.runtime.name,
                    feature="shader-f16",
                    op=self.op,
                )

    def _bind(
        self, spec: Specialization, values: Sequence[Any]
    ) -> tuple[list[Any], list[Any], tuple[int, ...]]:
        """Uniform values per parameter, one buffer per distinct storage, and the grouping."""
        views: list[Any] = []
        buffers: list[Any] = []
        groups: list[int] = []
        seen: dict[int, int] = {}
        for p, v in zip(spec.params, values, strict=True):
            if p.kind != "array":
                views.append(_scalar(v, p.dtype, p.name, self.op))
                continue
            assert isinstance(v, Tensor)
            if any(s < 0 for s in v.strides):
                raise UnsupportedError(
                    f"array {p.name!r} has a negative stride {v.strides}; DSL kernels index "
                    "with u32 offsets: canonicalize the view first",
                    backend=self.runtime.name,
                    feature="negative strides",
                    op=self.op,
                )
            lo, hi = v.span()
            check_u32_array(p.name, v.numel, hi - lo)
            storage = v.storage
            key = id(storage) if isinstance(storage, WebGpuStorage) else 0
            if key not in seen:
                seen[key] = len(seen)
                buffers.append(
                    storage.buffer if isinstance(storage, WebGpuStorage)
                    else self.webgpu.placeholder_buffer
                )
            groups.append(seen[key])
            views.append(wgsl.ArrayView(v.offset, v.shape, v.strides))
        limit = self.webgpu.device_info.max_storage_buffers_per_shader_stage
        if len(buffers) > limit:
            raise UnsupportedError(
                f"kernel {spec.kernel_name!r} binds {len(buffers)} distinct storages; the "
                f"adapter's max_storage_buffers_per_shader_stage is {limit}",
                backend=self.runtime.name,
                feature="max_storage_buffers_per_shader_stage",
                op=self.op,
            )
        return views, buffers, tuple(groups)


__all__ = ["JitBinding", "WebGpuJitSession"]

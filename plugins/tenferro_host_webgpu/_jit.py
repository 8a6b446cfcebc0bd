"""The WebGPU JIT session: ``ex.jit(op)`` launches DSL kernels as WGSL compute dispatches.

The user API and the argument checks come from :class:`tenferro_host.provider.JitSession`
(identical on cpu, cuda and webgpu). What is WebGPU's own: dispatches are recorded into the
runtime's pending encoder and submitted when the session ends (or earlier, when a download or
synchronize needs their results); grids beyond the per-dimension workgroup limit arrive folded
and the shader unfolds them; views bind with their offset, shape and strides in the uniform
block, so non-compact inputs give correct results; views of one storage share one binding.
On a software adapter a kernel with loops also carries the loop canary (:mod:`.wgsl`): each
such launch is submitted and its flag read at once, so a launch whose loops the driver cut
raises ``UnsupportedError`` from ``launch`` itself. The WGSL of a new pipeline comes from the
persistent kernel cache when an earlier process generated it (:mod:`.wgsl_cache`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenferro_host import InvalidLaunchConfigError, Tensor, UnsupportedError
from tenferro_host.kernel import Specialization, ir
from tenferro_host.provider import ExecSession, Grid, JitLaunch, JitSession, Memo, memo

from . import _wgsl, wgsl_cache
from ._replay import PlannedDispatch
from ._runtime import WebGpuRuntime
from ._storage import WebGpuStorage
from ._uniforms import ArrayView, pack_uniforms
from .device import WebGpuDeviceInfo


class _Facts:
    """What launching a specialization needs that depends on it alone, worked out once (IR
    walks cost each launch otherwise)."""

    __slots__ = ("fallback_unit_bytes", "loops", "portable", "shared_bytes", "spec")

    def __init__(self, spec: Specialization) -> None:
        self.spec = spec  # keeps the id in the key from being reused
        self.shared_bytes = _wgsl.workgroup_bytes(spec.ir)
        native = _wgsl.FEATURE in spec.features
        self.fallback_unit_bytes = _wgsl.fallback_unit_bytes(spec.ir, native)
        self.loops = _wgsl.uses_loops(spec.ir.body)
        self.portable = False  # set once the dtypes passed the portability rule


#: id(specialization) -> its facts (an entry is checked to be of the same specialization).
_FACTS: Memo[int, _Facts] = memo("webgpu.jit_facts", 1024, what="launch facts by specialization")


def _facts(spec: Specialization) -> _Facts:
    found = _FACTS.get(id(spec))
    if found is not None and found.spec is spec:
        return found
    return _FACTS.put(id(spec), _Facts(spec))


class WebGpuJitSession(JitSession):
    """A DSL session on a WebGPU runtime; its dispatches are one batch, submitted at exit."""

    target = "webgpu"
    default_cube_dim = 256  # every WebGPU adapter allows 256 invocations per workgroup

    def __init__(self, exec_session: ExecSession, op: str | None) -> None:
        super().__init__(exec_session, op)
        assert isinstance(exec_session.runtime, WebGpuRuntime)
        self.webgpu: WebGpuRuntime = exec_session.runtime
        #: the device's limits and features, read once per session (a launch asks six times)
        self._info: WebGpuDeviceInfo = self.webgpu.device_info
        self._canary_flag: Any = None

    # -- backend contract -------------------------------------------------------------------------
    @property
    def features(self) -> tuple[str, ...]:
        """``shader-f16`` and ``subgroup`` where the device has them: they change the WGSL."""
        info = self._info
        return ("shader-f16",) * info.shader_f16 + ("subgroup",) * info.subgroups

    @property
    def max_grid(self) -> Grid:
        """Workgroups per dispatch dimension the device allows (larger grids arrive folded)."""
        limit = self.webgpu.max_workgroups_per_dimension
        return (limit, limit, limit)

    @property
    def max_cube_threads(self) -> int:
        """Invocations per workgroup the device allows."""
        return self._info.max_compute_invocations_per_workgroup

    def _on_enter(self) -> None:
        self.webgpu.queue.hold()

    def _on_exit(self, error: BaseException | None) -> None:
        self.webgpu.queue.release()

    def _check_specialization(self, spec: Specialization) -> None:
        """The portability rule: no f64/i64 ever; f16 only with ``shader-f16``; shared arrays
        within the device's workgroup storage.

        The dtype verdict depends on the specialization alone (``shader-f16`` is among its
        features exactly when the adapter offers it), so one that passed is remembered and the IR
        walk happens once per specialization, not per launch. The workgroup-storage limit is the
        device's, so that sum over the shared arrays is checked every time.
        """
        facts = _facts(spec)
        self._check_workgroup_bytes(spec, facts.shared_bytes)
        if facts.portable:
            return
        _wgsl.check_portable(spec.ir, self._info.shader_f16, self.runtime.name)
        facts.portable = True

    def _check_workgroup_bytes(
        self, spec: Specialization, nbytes: int, unit_bytes: int = 0, units: int = 0
    ) -> None:
        """The shared arrays (at a launch's sizes) fit the adapter's workgroup storage, with the
        subgroup fallback's ``unit_bytes`` for each of a launch's ``units`` per cube (the driver
        may not check it: llvmpipe runs such a pipeline)."""
        limit = self._info.max_compute_workgroup_storage_size
        fallback = unit_bytes * units
        if nbytes + fallback <= limit:
            return
        feature = _wgsl.FEATURE
        added = (
            f", and its subgroup operations add {fallback} bytes (the fallback's workgroup array, "
            f"4 per unit of the cube of {units} units: the adapter has no '{feature}' feature)"
        )
        raise ir.shared_memory_error(
            spec.ir,
            nbytes,
            limit,
            "the adapter",
            "workgroup storage",
            backend=self.runtime.name,
            feature="maxComputeWorkgroupStorageSize",
            added=added if fallback else "",
            fix=(
                f" or a smaller cube, or an adapter with the '{feature}' feature"
                if fallback
                else ""
            ),
        )

    def _dispatch(self, launch: JitLaunch) -> PlannedDispatch:
        spec = launch.spec
        rt = self.webgpu
        self._check_dim(launch.dim)
        buffers, owners, groups, block = self._bind(spec, launch.args)
        folded = launch.grid != launch.count
        canary = self._info.software and _facts(spec).loops
        if canary:
            buffers.append(self._arm_loop_canary())
            self._refuse_plan("a kernel with loops on a software adapter (its loop canary)")
        elif len(owners) != len(buffers):
            self._refuse_plan("an empty array argument (bound to the placeholder buffer)")
        # Specializations are cached objects: the pipeline keeps its own alive, so its id is a
        # key that cannot be reused while the entry exists (hashing the IR would cost each launch).
        sizes = launch.shared_sizes
        if sizes:
            self._check_workgroup_bytes(spec, _wgsl.workgroup_bytes(spec.ir, sizes))
        key = (id(spec), launch.dim, groups, folded, canary, sizes)
        pipeline = rt.pipelines.lookup(key) or self._pipeline(key, spec, launch.dim)
        # The uniform block is determined by the specialization, the grid and ``block`` (views
        # as offset/shape/strides, scalars by their bits): one immutable buffer per distinct one.
        params = rt.uniforms.get(
            (id(spec), launch.count, launch.grid, *block),
            lambda: pack_uniforms(spec, launch.count, launch.grid, self._views(launch)),
            keepalive=spec,
        )
        planned = PlannedDispatch(pipeline, params, groups, launch, self.op)
        try:
            # The canary's flag is this session's: its launches bind a group of their own.
            rt.dispatch(pipeline, params, buffers, launch.grid, None if canary else owners)
        except rt.wgpu_errors as exc:
            raise planned.rejected(exc) from exc
        if rt.debug_sync:
            rt.debug_wait(f"kernel {spec.kernel_name!r} ({planned.config})", self.op)
        if canary:
            self._check_loop_canary(spec, buffers[-1])
        return planned

    # -- helpers ----------------------------------------------------------------------------------
    def _pipeline(self, key: tuple[Any, ...], spec: Specialization, dim: Grid) -> Any:
        """The pipeline of ``key`` on a miss of the fast lookup: loaded or built, once the
        subgroup fallback's array (per cube of ``dim``, so per pipeline) fits beside the shared
        arrays."""
        _, _, groups, folded, canary, sizes = key
        unit_bytes = _facts(spec).fallback_unit_bytes
        if unit_bytes:
            nbytes = _wgsl.workgroup_bytes(spec.ir, sizes)
            self._check_workgroup_bytes(spec, nbytes, unit_bytes, dim[0] * dim[1] * dim[2])
        info = self._info
        return self.webgpu.pipelines.get(
            key,
            lambda: self._compile(spec, dim, groups, folded, canary, sizes),
            what=f"kernel {spec.kernel_name!r}",
            keepalive=spec,
            locate=lambda line: _wgsl.generate(spec, dim, groups, folded, canary, sizes).locate(
                line
            ),
            op=self.op,
            stored=lambda: wgsl_cache.wgsl_key(spec, dim, groups, folded, canary, info, sizes),
        )

    @staticmethod
    def _views(launch: JitLaunch) -> list[Any]:
        """The uniform values per parameter, as :func:`pack_uniforms` takes them."""
        return [
            ArrayView(v.offset, v.shape, v.strides) if isinstance(v, Tensor) else v
            for v in launch.args
        ]

    @staticmethod
    def _compile(
        spec: Specialization,
        dim: Grid,
        groups: tuple[int, ...],
        folded: bool,
        canary: bool,
        sizes: tuple[int, ...],
    ) -> tuple[str, tuple[bool, ...]]:
        program = _wgsl.generate(spec, dim, groups, folded, canary, sizes)
        return program.source, program.writable

    def _arm_loop_canary(self) -> Any:
        """The canary's flag word, cleared ahead of the dispatch about to be recorded."""
        if self._canary_flag is None:
            self._canary_flag = self.webgpu.new_flag_buffer()
        with self.webgpu.queue.lock:
            self.webgpu.queue.encoder().clear_buffer(self._canary_flag)
        return self._canary_flag

    def _check_loop_canary(self, spec: Specialization, flag: Any) -> None:
        """Software adapters (Mesa llvmpipe) stop every loop of an invocation after 65535 loop
        trips in total, silently; the canary saw it: refuse the launch's results."""
        if int.from_bytes(self.webgpu.queue.read(flag, 0, 4), "little") == 0:
            return
        raise UnsupportedError(
            f"kernel {spec.kernel_name!r} ran more loop iterations in one thread than the "
            f"software adapter {self._info.name!r} executes (65535 in total per "
            "invocation; llvmpipe cuts loops there silently), so the outputs of this launch are "
            "wrong: give each thread fewer iterations (more threads) or use a hardware adapter",
            backend=self.runtime.name,
            feature="more than 65535 loop iterations per invocation",
        )

    def _check_dim(self, dim: Grid) -> None:
        limits = self._info.max_compute_workgroup_size
        for axis, (d, limit) in enumerate(zip(dim, limits, strict=True)):
            if d > limit:
                raise InvalidLaunchConfigError(
                    f"dim[{axis}]={d} exceeds the adapter's max_compute_workgroup_size {limits}",
                    argument="dim",
                )

    def _bind(
        self, spec: Specialization, args: tuple[Any, ...]
    ) -> tuple[list[Any], list[WebGpuStorage], tuple[int, ...], list[Any]]:
        """One buffer per distinct storage, the storages owning them, the grouping, and what
        determines the uniform block beyond the grid (per parameter: a view's offset, shape and
        strides; a scalar's type and bits)."""
        buffers: list[Any] = []
        owners: list[WebGpuStorage] = []
        groups: list[int] = []
        block: list[Any] = []
        seen: dict[int, int] = {}
        for p, v in zip(spec.params, args, strict=True):
            if p.kind != "array":
                # np.float32(-0.0) == 0.0: a scalar's key is its exact bits, never its value.
                block.append(v.tobytes() if isinstance(v, np.generic) else (type(v), repr(v)))
                continue
            storage = v.storage
            # Empty tensors own no buffer: they all share the runtime's placeholder binding.
            key = id(storage) if isinstance(storage, WebGpuStorage) else 0
            slot = seen.get(key)
            if slot is None:
                slot = seen[key] = len(seen)
                if key:
                    buffers.append(storage.buffer)
                    owners.append(storage)
                else:
                    buffers.append(self.webgpu.placeholder_buffer)
            groups.append(slot)
            block.append((v.offset, v.shape, v.strides))
        limit = self._info.max_storage_buffers_per_shader_stage
        if len(buffers) > limit:
            raise UnsupportedError(
                f"kernel {spec.kernel_name!r} binds {len(buffers)} distinct storages; the "
                f"adapter's max_storage_buffers_per_shader_stage is {limit}",
                backend=self.runtime.name,
                feature="max_storage_buffers_per_shader_stage",
            )
        return buffers, owners, tuple(groups), block


__all__ = ["WebGpuJitSession"]

"""The WebGPU op replay: a recorded op call's DSL dispatches re-encoded without the full path.

The JIT session's dispatch resolves, once per launch shape, everything that does not change
between calls of one op call key (:mod:`tenferro_host.provider._op_plan`): the pipeline with
its bind-group layout, the uniform buffer (its block is fixed by the specialization, the grid,
the views and the scalars, all held by the key), which argument binds which storage buffer,
and the workgroup grid. :class:`WebGpuReplay` keeps that per launch, so a planned call is a
guard, the outputs' allocation (the runtime's free list), the bind group of this call's
buffers (cached per buffer identity, :class:`.pipelines.BindGroups`) and one encode + submit,
as a bare wgpu-py dispatch does. What its guard cannot vouch for — debug waits, a fold limit
changed since, a written input that is a read-only borrow — answers ``REPLAY_MISS`` and the
call takes the full path, which raises the typed error it always did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenferro_host import LaunchError
from tenferro_host.provider import REPLAY_MISS, JitLaunchRecord, OpRecording, OpReplay

if TYPE_CHECKING:
    from tenferro_host.provider import JitLaunch

    from ._runtime import WebGpuRuntime
    from .pipelines import Pipeline


class PlannedDispatch:
    """A DSL dispatch as resolved by the JIT session: what a replay of it needs besides the
    buffers (``groups``: the binding of each array parameter, in order)."""

    __slots__ = ("count", "dim", "grid", "groups", "kernel_name", "op", "params", "pipeline")

    def __init__(
        self,
        pipeline: Pipeline,
        params: Any,
        groups: tuple[int, ...],
        launch: JitLaunch,
        op: str | None,
    ) -> None:
        self.pipeline, self.params, self.groups, self.grid = pipeline, params, groups, launch.grid
        self.kernel_name, self.op = launch.spec.kernel_name, op
        self.count, self.dim = launch.count, launch.dim

    @property
    def config(self) -> str:
        """The launch shape, as messages name it."""
        return f"count {self.count}, dim {self.dim}, workgroups {self.grid}"

    def rejected(self, exc: Exception) -> LaunchError:
        """The typed error for a dispatch wgpu refused."""
        return LaunchError(
            f"WebGPU rejected the dispatch of kernel {self.kernel_name!r} ({self.config}): {exc}",
            op=self.op,
        )


class _Dispatch:
    """One recorded dispatch: its planned form and the call slot bound at each binding."""

    __slots__ = ("bindings", "planned")

    def __init__(self, record: JitLaunchRecord) -> None:
        self.planned, self.bindings = record.form, _bindings(record)


class WebGpuReplay(OpReplay):
    """A recorded WebGPU op call, replayed: guard, outputs, bind group, encode + submit."""

    __slots__ = ("_fold_limit", "_launches")
    runtime: WebGpuRuntime

    def __init__(self, runtime: WebGpuRuntime, rec: OpRecording) -> None:
        launches = tuple(_Dispatch(r) for r in rec.launches)
        fold_limit = runtime.max_workgroups_per_dimension
        super().__init__(
            runtime,
            rec,
            (
                fold_limit,
                tuple(
                    (d.planned.pipeline, d.planned.params, d.planned.grid, d.bindings)
                    for d in launches
                ),
            ),
        )
        self._launches, self._fold_limit = launches, fold_limit

    def __call__(self, tensors: tuple[Any, ...]) -> Any:
        rt = self.runtime
        if rt.debug_sync or rt._fold_limit != self._fold_limit:
            return REPLAY_MISS  # the full path waits and attributes, or folds anew
        for i in self.exclusive:
            if tensors[i].storage.read_only:
                return REPLAY_MISS  # the full path raises the typed error
        outs: list[Any] = self.allocate() if self.outputs else []  # a launch plan has none
        launches, queue = self._launches, rt.queue
        held = len(launches) > 1
        if held:
            queue.hold()  # one command buffer for the call, as the full path's batch
        try:
            # (inline, plain loops: a planned call enters each file once)
            for launch in launches:
                planned, owners, buffers = launch.planned, [], []
                for which, i in launch.bindings:  # this call's storage at each binding
                    storage = (tensors[i] if which == 0 else outs[i]).storage
                    owners.append(storage)
                    buffers.append(storage.buffer)
                pipeline = planned.pipeline
                try:
                    group = rt.bind_groups.get(pipeline.layout, planned.params, buffers, owners)
                    queue.dispatch_now(pipeline.pipeline, group, planned.grid)
                except rt.wgpu_errors as exc:
                    raise planned.rejected(exc) from exc
        finally:
            if held:
                queue.release()
        return tuple(outs) if self.several else outs[0]

    def steps(self, tensors: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
        """Each step of a replay of ``tensors`` on its own, for the bench, and its anchor: the
        bare wgpu-py dispatch of the same pipeline (same WGSL, same uniform and storage
        buffers, a kept output) on the runtime's device, its bind group made once."""
        rt = self.runtime
        first = self._launches[0]
        planned = first.planned
        owners, buffers = _bound(first.bindings, tensors, self.allocate())
        layout, pipeline, params, grid = (
            planned.pipeline.layout,
            planned.pipeline.pipeline,
            planned.params,
            planned.grid,
        )
        group = rt.bind_groups.get(layout, params, buffers, owners)
        device = rt._device
        entries = [{"binding": 0, "resource": {"buffer": params}}]
        entries += [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers, 1)]
        bare_group = device.create_bind_group(layout=layout, entries=entries)

        def bare() -> None:
            encoder = device.create_command_encoder()
            cpass = encoder.begin_compute_pass()
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, bare_group)
            cpass.dispatch_workgroups(*grid)
            cpass.end()
            device.queue.submit([encoder.finish()])

        return (
            {"bare wgpu-py dispatch": bare}
            | super().steps(tensors)
            | {
                "bind group": lambda: rt.bind_groups.get(layout, params, buffers, owners),
                "encode + submit": lambda: rt.queue.dispatch_now(pipeline, group, grid),
            }
        )


def _bound(
    bindings: tuple[tuple[int, int], ...], tensors: tuple[Any, ...], outs: list[Any]
) -> tuple[list[Any], list[Any]]:
    """The storages at bindings 1..n of one call, and their buffers."""
    owners = [(tensors[i] if which == 0 else outs[i]).storage for which, i in bindings]
    return owners, [s.buffer for s in owners]


def _bindings(record: JitLaunchRecord) -> tuple[tuple[int, int], ...]:
    """The call slot whose storage buffer goes at each binding 1..n of the dispatch."""
    planned: PlannedDispatch = record.form
    arrays = [s for s in record.slots if s is not None]
    found: dict[int, tuple[int, int]] = {}
    for group, slot in zip(planned.groups, arrays, strict=True):
        found.setdefault(group, slot)
    return tuple(found[g] for g in range(len(found)))


def op_replay(runtime: WebGpuRuntime, rec: OpRecording) -> WebGpuReplay | None:
    """The replay of a clean recording of DSL dispatches, or None (it stays on the full path)."""
    if not all(type(r) is JitLaunchRecord for r in rec.launches):
        return None
    return WebGpuReplay(runtime, rec)


__all__ = ["PlannedDispatch", "WebGpuReplay", "op_replay"]

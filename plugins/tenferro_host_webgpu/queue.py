"""The runtime's queue: one pending command encoder, batch holds, and the one completion wait.

Work (clears, copies, dispatches) is recorded into a pending encoder. Outside a held batch it
is submitted at once; while a JIT session holds the batch, dispatches accumulate and are
submitted when the last hold ends, or earlier when something must observe the results
(a download, a synchronize).

Completion wait: wgpu 0.32.0's ``queue.on_submitted_work_done_sync()`` (and ``_async``) raise
``TypeError`` (its callback signature does not match wgpu-native's). A queue executes its
submissions in order, so mapping a tiny buffer that the *last* submission copied into returns
exactly when all submitted work has finished; that is :meth:`CommandQueue.wait_idle`.
"""

from __future__ import annotations

import threading
from typing import Any


class CommandQueue:
    """Pending encoder + open compute pass of one device queue; thread-safe."""

    def __init__(self, device: Any) -> None:
        import wgpu

        self._wgpu = wgpu
        self._device = device
        #: held while recording, so two threads never interleave commands
        self.lock = threading.RLock()
        self._encoder: Any = None
        #: whether recorded work waits to be submitted (a plain attribute: read per allocation)
        self.pending = False
        self._pass: Any = None
        # What the open pass has set (held, so compared by identity): not set again.
        self._pass_pipeline: Any = None
        self._pass_group: Any = None
        self._holds = 0
        self.submissions = 0
        self._fence_src = device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC)
        self._fence = device.create_buffer(
            size=4, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
        )

    def encoder(self) -> Any:
        """The pending encoder, with no compute pass open (for copies and clears)."""
        with self.lock:
            try:
                if self._pass is not None:
                    self._end_pass()
                if self._encoder is None:
                    self._encoder = self._device.create_command_encoder()
                    self.pending = True
            except BaseException:
                self._discard()
                raise
            return self._encoder

    def _end_pass(self) -> None:
        cpass = self._pass
        self._pass = self._pass_pipeline = self._pass_group = None
        cpass.end()

    def _discard(self) -> None:
        """Drop the pending encoder and its pass: an exception inside wgpu-py (a Ctrl-C lands
        there too) left their state unknown — a pass begun but not recorded as open, an encoder
        half finished. That batch is lost, as the interrupted work it holds; the queue goes on
        with a fresh encoder instead of failing every later submit."""
        self._encoder = self._pass = self._pass_pipeline = self._pass_group = None
        self.pending = False

    def compute_pass(self) -> Any:
        """The open compute pass of the pending encoder (each dispatch is its own usage scope)."""
        with self.lock:
            if self._pass is None:
                encoder = self.encoder()
                try:
                    self._pass = encoder.begin_compute_pass()
                except BaseException:
                    self._discard()
                    raise
            return self._pass

    def record(self, pipeline: Any, group: Any, workgroups: tuple[int, int, int]) -> None:
        """Record one dispatch into the open compute pass; the pipeline and bind group are set
        only when they differ from what the pass has set already."""
        with self.lock:
            cpass = self._pass if self._pass is not None else self.compute_pass()
            try:
                if self._pass_pipeline is not pipeline:
                    self._pass_pipeline = None  # unknown until set_pipeline returns
                    cpass.set_pipeline(pipeline)
                    self._pass_pipeline = pipeline
                if self._pass_group is not group:
                    self._pass_group = None
                    cpass.set_bind_group(0, group)
                    self._pass_group = group
                cpass.dispatch_workgroups(*workgroups)
            except BaseException:
                self._discard()
                raise

    def dispatch_now(self, pipeline: Any, group: Any, workgroups: tuple[int, int, int]) -> None:
        """Record one dispatch and submit it unless a batch is held (a replayed op call). With
        nothing pending it is one command buffer built in one go, as a bare wgpu-py dispatch."""
        with self.lock:
            if self._encoder is not None or self._holds:
                self.record(pipeline, group, workgroups)
                self.commit()
                return
            encoder = self._device.create_command_encoder()  # held by no one: nothing to discard
            cpass = encoder.begin_compute_pass()
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(*workgroups)
            cpass.end()
            self._device.queue.submit([encoder.finish()])
            self.submissions += 1

    def hold(self) -> None:
        """Keep recorded work pending until every hold is released (a JIT session's scope)."""
        with self.lock:
            self._holds += 1

    def release(self) -> None:
        """End one hold; the last one submits the batch."""
        with self.lock:
            self._holds -= 1
            if self._holds == 0:
                self.flush()

    def commit(self) -> None:
        """Submit the pending work unless a batch is held (called after recording)."""
        with self.lock:
            if self._holds == 0:
                self.flush()

    def flush(self) -> None:
        """Submit the pending encoder now, held or not."""
        with self.lock:
            encoder, cpass = self._encoder, self._pass
            if encoder is None:
                return
            self._discard()  # taken out first: an interruption below leaves no finished encoder
            if cpass is not None:
                cpass.end()
            buffer = encoder.finish()
            self._device.queue.submit([buffer])
            self.submissions += 1

    def wait_idle(self) -> None:
        """Submit pending work and block until everything submitted so far has finished."""
        with self.lock:
            self.encoder().copy_buffer_to_buffer(self._fence_src, 0, self._fence, 0, 4)
            self.flush()
            try:
                self._fence.map_sync(self._wgpu.MapMode.READ)
            finally:
                self._unmap_fence()

    def _unmap_fence(self) -> None:
        """Unmap the fence after a wait; after an interrupted map, cancel it so the next wait
        can map again (there is nothing to unmap then, which wgpu may refuse)."""
        try:
            self._fence.unmap()
        except Exception:  # noqa: BLE001 - an interrupted map left nothing mapped
            if self._fence.map_state == "mapped":
                raise

    def read(self, buffer: Any, byte_offset: int, nbytes: int) -> memoryview:
        """Submit pending work, then copy ``nbytes`` (4-byte aligned range) to the host."""
        with self.lock:
            self.flush()
            data: memoryview = self._device.queue.read_buffer(buffer, byte_offset, nbytes)
            return data


__all__ = ["CommandQueue"]

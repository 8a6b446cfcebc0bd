"""A Ctrl-C (any exception) inside wgpu-py while the queue changes state leaves it usable.

The WebGPU Ctrl-C launch-loop test failed in CI with "Encoding must not have ended": the
interrupt landed after ``encoder.finish()`` had finished the encoder and before the queue forgot
it, so every later submit finished it again. A stand-in device raises at each such point.
"""

from __future__ import annotations

from typing import Any

import pytest
from tenferro_host_webgpu.queue import CommandQueue


class Encoder:
    def __init__(self, device: Device) -> None:
        self.device = device
        self.state = "open"  # open -> locked (pass) -> open -> finished

    def _hit(self, point: str) -> None:
        if self.device.fail_at == point:
            self.device.fail_at = None
            raise KeyboardInterrupt(point)

    def begin_compute_pass(self) -> Pass:
        assert self.state == "open", "Encoding must not have ended"
        self.state = "locked"
        cpass = Pass(self)
        self._hit("after begin_compute_pass")
        return cpass

    def finish(self) -> str:
        assert self.state == "open", "Encoding must not have ended"
        self.state = "finished"
        self._hit("after finish")
        return "commands"

    def copy_buffer_to_buffer(self, *args: Any) -> None:
        assert self.state == "open", "Encoding must not have ended"


class Pass:
    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder

    def set_pipeline(self, pipeline: Any) -> None:
        self.encoder._hit("in set_pipeline")

    def set_bind_group(self, index: int, group: Any) -> None:
        pass

    def dispatch_workgroups(self, *counts: int) -> None:
        assert self.encoder.state == "locked"
        self.encoder._hit("in dispatch")

    def end(self) -> None:
        self.encoder.state = "open"
        self.encoder._hit("after end")


class Queue:
    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def submit(self, buffers: list[Any]) -> None:
        self.submitted += buffers


class Device:
    def __init__(self) -> None:
        self.fail_at: str | None = None
        self.queue = Queue()

    def create_buffer(self, **kwargs: Any) -> object:
        return object()

    def create_command_encoder(self) -> Encoder:
        return Encoder(self)


@pytest.mark.parametrize(
    "point",
    ["after begin_compute_pass", "in set_pipeline", "in dispatch", "after end", "after finish"],
)
def test_an_interruption_anywhere_leaves_the_queue_usable(point: str) -> None:
    device = Device()
    queue = CommandQueue(device)
    queue.record("pipeline", "group", (1, 1, 1))
    queue.flush()
    device.fail_at = point
    with pytest.raises(KeyboardInterrupt):
        for _ in range(3):  # the interruption lands in one of these
            queue.record("pipeline", "group", (1, 1, 1))
            queue.flush()
    assert device.fail_at is None  # it did land
    submitted = len(device.queue.submitted)
    queue.record("pipeline", "group", (1, 1, 1))  # the next batch records and submits
    queue.flush()
    assert len(device.queue.submitted) == submitted + 1
    assert not queue.pending

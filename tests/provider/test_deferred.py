"""Deferred releases: a collected DeviceStorage queues its release; the drain point runs it."""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import pytest

from tenferro_host import Host
from tenferro_host.dtypes import DType
from tenferro_host.errors import BackendError
from tenferro_host.provider import DeferredReleases, DeviceStorage, Release, Runtime, Storage
from tenferro_host.tensor import Tensor


class Recording(Runtime):
    """A runtime whose storages are DeviceStorages and which records what it releases."""

    def __init__(self) -> None:
        super().__init__(Host(), "recording", 0)
        self.released: list[Release] = []
        self.next_handle = 0

    @property
    def device(self) -> object:
        return "recording:0"

    @property
    def device_info(self) -> Any:
        return None

    def _allocate(self, nbytes: int, dt: DType) -> Storage:
        self.next_handle += 1
        return DeviceStorage(self, nbytes, ("memory", self.next_handle))

    def _release_deferred(self, releases: list[Release]) -> None:
        self.released += releases

    def _write(self, storage: Storage, data: np.ndarray) -> None:
        pass

    def _read(self, storage: Storage, byte_offset: int, nbytes: int) -> np.ndarray:
        return np.zeros(nbytes, np.uint8)

    def _fill_zero(self, storage: Storage) -> None:
        pass

    def _copy_to_compact(self, src: Tensor, dst: Tensor) -> None:
        pass


def test_a_collected_storage_queues_its_release_and_the_drain_point_runs_it() -> None:
    rt = Recording()
    t = rt.empty("float32", (4,))
    del t
    gc.collect()
    assert list(rt.deferred) == [("memory", 1)] and rt.released == []  # nothing done yet
    rt.drain_deferred()
    assert rt.released == [("memory", 1)] and not rt.deferred


def test_a_session_entry_is_a_drain_point() -> None:
    rt = Recording()
    rt.empty("float32", (4,))  # collected at once
    with rt.session():
        assert rt.released == [("memory", 1)]


def test_a_storage_with_no_release_queues_nothing() -> None:
    rt = Recording()
    storage = DeviceStorage(rt, 0, None)
    del storage
    assert not rt.deferred


def test_storages_collected_on_other_threads_are_all_released_once() -> None:
    rt = Recording()

    def make_and_drop() -> None:
        for _ in range(500):
            DeviceStorage(rt, 4, ("memory", threading.get_ident()))

    threads = [threading.Thread(target=make_and_drop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.drain_deferred()
    assert len(rt.released) == 2000 and not rt.deferred


def test_take_all_empties_the_queue_in_order() -> None:
    queue = DeferredReleases()
    for i in range(3):
        queue.append(("memory", i))
    assert queue.take_all() == [("memory", 0), ("memory", 1), ("memory", 2)]
    assert queue.take_all() == []


def test_a_runtime_without_a_release_hook_says_so_instead_of_dropping_releases() -> None:
    class NoHook(Recording):
        _release_deferred = Runtime._release_deferred  # type: ignore[assignment]

    rt: Any = NoHook()
    rt.deferred.append(("memory", 7))
    with pytest.raises(BackendError, match=r"1 releases were queued but NoHook does not"):
        rt.drain_deferred()

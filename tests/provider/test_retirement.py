"""The retirement queue: leases released in order once their event completed; bounded."""

from __future__ import annotations

from tenferro_host.provider import Counters, Lease, RetirementQueue


class Events:
    """Fake events: names in ``done`` are complete; ``wait`` completes one and logs it."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.waited: list[str] = []

    def is_done(self, event: str) -> bool:
        return event in self.done

    def wait(self, event: str) -> None:
        self.waited.append(event)
        self.done.add(event)


def make(capacity: int = 3) -> tuple[RetirementQueue, Events, Counters, list[str]]:
    events, counters, released = Events(), Counters(), []
    queue = RetirementQueue(counters, is_done=events.is_done, wait=events.wait, capacity=capacity)
    return queue, events, counters, released


def lease(log: list[str], name: str) -> Lease:
    return Lease(name, log.append)


def test_poll_releases_only_the_completed_prefix_without_waiting():
    queue, events, counters, released = make()
    queue.retire("e1", [lease(released, "a"), lease(released, "b")])
    queue.retire("e2", [lease(released, "c")])
    assert counters.values["leases_pending"] == 3
    events.done.add("e2")  # completed out of order: e1 still holds the head
    assert queue.poll() == 0 and released == []
    events.done.add("e1")
    assert queue.poll() == 3 and released == ["a", "b", "c"]
    assert len(queue) == 0 and events.waited == []
    assert counters.values["leases_pending"] == 0 and counters.values["leases_released"] == 3


def test_empty_lease_batches_are_not_queued():
    queue, _, counters, _ = make()
    queue.retire("e1", [])
    assert len(queue) == 0 and counters.values["leases_pending"] == 0


def test_full_queue_waits_on_its_oldest_event_only():
    queue, events, counters, released = make(capacity=2)
    for name in ("e1", "e2"):
        queue.retire(name, [lease(released, name)])
    assert counters.values["queue_full_waits"] == 0
    queue.retire("e3", [lease(released, "e3")])
    assert events.waited == ["e1"]
    assert released == ["e1"] and len(queue) == 2
    assert counters.values["queue_full_waits"] == 1


def test_retire_polls_first_so_a_completed_head_frees_room_without_waiting():
    queue, events, counters, released = make(capacity=1)
    queue.retire("e1", [lease(released, "e1")])
    events.done.add("e1")
    queue.retire("e2", [lease(released, "e2")])
    assert events.waited == [] and counters.values["queue_full_waits"] == 0
    assert released == ["e1"]


def test_drain_waits_for_everything_in_order():
    queue, events, counters, released = make()
    queue.retire("e1", [lease(released, "a")])
    queue.retire("e2", [lease(released, "b")])
    queue.drain()
    assert events.waited == ["e1", "e2"] and released == ["a", "b"]
    assert counters.values["leases_released"] == 2 and len(queue) == 0


def test_concurrent_polls_never_release_a_lease_whose_event_is_pending():
    """Thread A checks the oldest event; B polls meanwhile; A must not pop B's successor."""
    import threading

    events, counters, released = Events(), Counters(), []
    b_finished = threading.Event()
    a_checking = threading.Event()

    def is_done(event: str) -> bool:
        if threading.current_thread().name == "A" and not a_checking.is_set():
            a_checking.set()
            b_finished.wait(timeout=0.5)  # without a lock, B pops "e0" in this window
        return events.is_done(event)

    queue = RetirementQueue(counters, is_done=is_done, wait=events.wait)
    queue.retire("e0", [lease(released, "e0")])
    queue.retire("e1", [lease(released, "e1")])
    events.done.add("e0")

    def poll_b() -> None:
        a_checking.wait(timeout=5)
        queue.poll()
        b_finished.set()

    a = threading.Thread(target=queue.poll, name="A")
    b = threading.Thread(target=poll_b, name="B")
    a.start()
    b.start()
    a.join()
    b.join()
    assert released == ["e0"]  # e1's event never completed
    assert len(queue) == 1 and counters.snapshot()["leases_pending"] == 1


def test_a_lease_names_what_it_keeps_and_lets_it_go_once() -> None:
    let_go: list[object] = []
    kept = ["staging", "buffer"]
    held = Lease(kept, let_go.append)
    assert "Lease of list" in repr(held) and "staging" in repr(held)
    held.release()
    assert let_go == [kept] and held.keeps is None  # the reference is dropped
    held.release()
    assert let_go == [kept]  # released once


def test_a_holding_lease_keeps_its_object_alive_until_its_event_completes() -> None:
    import gc
    import weakref

    class Source:
        pass

    queue, events, _, _ = make()
    source = Source()
    ref = weakref.ref(source)
    queue.retire("e1", [Lease(source)])
    del source
    gc.collect()
    assert ref() is not None  # the lease holds it while e1 is pending
    events.done.add("e1")
    queue.poll()
    gc.collect()
    assert ref() is None


def test_a_plain_callable_is_still_taken_as_a_lease() -> None:
    queue, events, _, released = make()
    queue.retire("e1", [lambda: released.append("called"), lease(released, "a")])
    events.done.add("e1")
    assert queue.poll() == 2 and released == ["called", "a"]

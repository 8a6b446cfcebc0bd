"""When a planned call key must not be replayed, on every backend: a session of the runtime open
on this thread takes the full path and its error, and a plan learned from one tensor passed
twice is not replayed for two tensors (which inputs share a storage is part of the key)."""

from __future__ import annotations

import pytest
from support.plan_backends import ADD, PlanBackend, backend_fixture

import tenferro_host as tf

backend = backend_fixture()


def test_a_session_open_on_this_thread_takes_the_full_path(backend: PlanBackend) -> None:
    a = backend.tensor("float32", (5,))
    for _ in range(3):
        backend.host.run(ADD, a, a)
    assert "replay" in backend.host.op(ADD).plans().values()
    with backend.rt.session(), pytest.raises(tf.RuntimeStateError, match="already open"):
        backend.host.run(ADD, a, a)


def test_a_plan_recorded_on_one_tensor_twice_is_not_replayed_for_two(
    backend: PlanBackend,
) -> None:
    """A plan learned from add(a, a) writes a's address into both slots, so add(a, b) must not
    replay it (it would read a twice: a wrong answer)."""
    a, b = backend.tensor("float32", (1,)), backend.tensor("float32", (1,))
    backend.observe(True, ADD, a, a)  # planned for the aliased call
    assert backend.observe(True, ADD, a, b, calls=1) == backend.observe(False, ADD, a, b, calls=1)
    assert backend.observe(True, ADD, a, b) == backend.observe(False, ADD, a, b, calls=1)

"""A plan that loses its last holder while it runs, on every backend: the replay (the compiled
core where the extension is built) finishes the call with what it holds, frees nothing the call
still uses, and gives what the full path gives."""

from __future__ import annotations

import pytest
from support.plan_backends import ADD, PlanBackend, backend_fixture

backend = backend_fixture()


def test_a_plan_dropped_while_its_replay_allocates_frees_nothing_in_use(
    backend: PlanBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle, dropping = backend.host.op(ADD), [False]
    handle.forget_plans()

    def drop() -> None:
        if dropping[0]:  # the plan (its replay, its core, its allocators) loses its last holder
            handle.forget_plans()

    backend.on_allocation(monkeypatch, drop)
    a, b = backend.tensor("float32", (64,)), backend.tensor("float32", (64,))
    kept = [handle(a, b) for _ in range(3)]  # kept: no queued block, the replay asks the runtime
    assert list(handle.plans().values()) == ["replay"]
    dropping[0] = True
    backend.before_call()
    kept.append(handle(a, b))
    assert handle.plans() == {}
    dropped = ("ran", backend.outcome((kept[-1],), (a, b)))
    dropping[0] = False
    assert dropped == backend.observe(False, ADD, a, b, calls=1)

"""Every backend has the same rooms for the same roles: a role's module has one name in each
(docs/architecture.md), so a reader who knows one backend finds their way in another."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: role -> module name, in every backend package
ROOMS = {
    "the runtime (storage primitives, allocation)": "_runtime.py",
    "the storage (what a tensor's memory is, and how it goes back)": "_storage.py",
    "the exec session (the execution authority)": "_exec_session.py",
    "the replay of an op plan": "_replay.py",
    "the DSL session": "_jit.py",
}
#: backend -> its packages (CUDA's DSL session is its own plugin, tenferro_host_cuda_jit)
BACKENDS = {
    "cpu": [ROOT / "tenferro_host" / "_cpu"],
    "cuda": [ROOT / "plugins" / "tenferro_host_cuda", ROOT / "plugins" / "tenferro_host_cuda_jit"],
    "webgpu": [ROOT / "plugins" / "tenferro_host_webgpu"],
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_role_has_its_room(backend):
    missing = [
        f"{room} ({role})"
        for role, room in ROOMS.items()
        if not any((package / room).is_file() for package in BACKENDS[backend])
    ]
    assert not missing, f"{backend} lacks " + ", ".join(missing)

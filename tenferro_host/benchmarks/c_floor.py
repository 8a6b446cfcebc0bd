"""The C floor row: ``c_floor.cu`` built with nvcc (when present) and loaded with ctypes.

One Python call makes :data:`LAUNCHES` launches in C (the row's ``per_call``), so the row is
what the driver costs per ``cuLaunchKernel`` with no Python around it, measured in the same
run as every other row.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from .baselines import BLOCK, N
from .timing import Case

SOURCE = Path(__file__).with_name("c_floor.cu")
#: launches per Python call of the row
LAUNCHES = 200


def _built() -> Path:
    """The shared library, built once per source (in the temp directory); RuntimeError: why not."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc not found: the C floor is built with it")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    library = Path(tempfile.gettempdir()) / f"tenferro_c_floor_{digest}.so"
    if not library.exists():
        command = [nvcc, "-O2", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-o", str(library)]
        command.append(str(SOURCE))
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"nvcc failed: {done.stderr.strip()[-500:]}")
    return library


def case(name: str, syncs: list[Callable[[], None]]) -> Case:
    """The row: ``c_floor_launches(LAUNCHES)`` per call, or the row not run, saying why."""
    try:
        lib = ctypes.CDLL(str(_built()))
        err = lib.c_floor_init(N, BLOCK)
        if err:
            raise RuntimeError(f"set-up failed with CUDA error {err}")
    except (RuntimeError, OSError) as exc:
        return Case(name, None, str(exc))

    def launches() -> None:
        err = lib.c_floor_launches(LAUNCHES)
        if err:
            raise RuntimeError(f"cuLaunchKernel failed with CUDA error {err}")

    def sync() -> None:
        err = lib.c_floor_sync()
        if err:
            raise RuntimeError(f"cuStreamSynchronize failed with CUDA error {err}")

    syncs.append(sync)
    return Case(name, launches, per_call=LAUNCHES)

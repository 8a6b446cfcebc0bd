"""``pip install --target`` of local distributions, offline: how the tests install fixtures.

Shared by ``tests/conftest.py`` (the plugin-loading fixture distributions) and the kit's tests
(its fixture packages and a scaffolded package).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def pip_install_target(sources: list[Path], target: Path) -> None:
    """``pip install --target`` offline without build isolation (how CI installs fixtures)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(target),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

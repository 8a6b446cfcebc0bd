"""Helpers shared by the test suite, imported as ``support.<module>`` (``from support import x``).

``tests/`` is on ``sys.path`` through ``pythonpath`` in pyproject.toml's pytest section, not
through edits of ``sys.path``. ``tests/`` itself stays a plain directory (no ``__init__.py``) and
the repository root has no ``conftest.py``: either would put the root on ``sys.path``, where the
source tree would shadow the installed wheel (``scripts/gpu-env`` refuses both).

A fresh interpreter a test starts gets ``support`` through :func:`env_with_path`.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The ``tests/`` directory: the one on ``sys.path`` that makes ``support`` importable.
TESTS = Path(__file__).resolve().parent.parent


def env_with_path(*paths: Path) -> dict[str, str]:
    """``os.environ`` with ``paths`` first on ``PYTHONPATH`` (the caller's entries behind them:
    on the GPU machine the installed wheel is reachable only through those)."""
    env = dict(os.environ)
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in paths), *inherited])
    return env

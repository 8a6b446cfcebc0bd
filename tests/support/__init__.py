"""Helpers shared by the test suite, imported as ``support.<module>`` (``from support import x``).

``tests/`` is on ``sys.path`` through ``pythonpath`` in pyproject.toml's pytest section, not
through edits of ``sys.path``. ``tests/`` itself stays a plain directory (no ``__init__.py``) and
the repository root has no ``conftest.py``: either would put the root on ``sys.path``, where the
source tree would shadow the installed wheel (``scripts/gpu-env`` refuses both).

A fresh interpreter a test starts gets ``support`` with :data:`TESTS` among the paths it passes
to :class:`support.subprocesses.Subprocess`.
"""

from __future__ import annotations

from pathlib import Path

#: The ``tests/`` directory: the one on ``sys.path`` that makes ``support`` importable.
TESTS = Path(__file__).resolve().parent.parent

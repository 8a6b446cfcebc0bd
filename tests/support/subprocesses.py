"""Fresh interpreters for the tests: the one way a test starts a child process.

A child gets this environment without the caller's ``TENFERRO_*`` settings, except the test
run's kernel and probe cache directories (``tests/conftest.py`` points both at fresh
directories), so what a test sets is all the child sees. ``tests/conftest.py`` hands a
:class:`Subprocess` out as the ``subproc`` fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The persistent kernel cache of a test run: a fresh directory, never the user's cache.
KERNEL_CACHE_DIR = "TENFERRO_CACHE_DIR"
#: The probe cache of a test run, likewise (a backend's discovery answers, provider._probe_cache).
PROBE_CACHE_DIR = "TENFERRO_PROBE_CACHE_DIR"


class Subprocess:
    """Fresh interpreters of this environment, without TENFERRO_* settings from the caller
    (but with the test run's kernel and probe cache directories)."""

    @staticmethod
    def env(paths: tuple[Path, ...] = (), **extra: str) -> dict[str, str]:
        """The current environment without TENFERRO_* settings, ``paths`` first on PYTHONPATH.

        The caller's PYTHONPATH stays behind them: on the GPU machine the installed package is
        reachable only through it.
        """
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("TENFERRO_") or k in (KERNEL_CACHE_DIR, PROBE_CACHE_DIR)
        }
        inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if paths or inherited:
            env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in paths), *inherited])
        env.update(extra)
        return env

    def python(
        self, code: str, paths: tuple[Path, ...] = (), **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``code`` with ``python -c``."""
        return self.run([sys.executable, "-c", code], paths, **env)

    def json(self, code: str, paths: tuple[Path, ...] = (), **env: str) -> Any:
        """Run ``code`` with ``python -c``; see :meth:`json_of`."""
        return self.json_of([sys.executable, "-c", code], paths, **env)

    def json_of(
        self, argv: list[str], paths: tuple[Path, ...] = (), *, cwd: Path | None = None, **env: str
    ) -> Any:
        """Run ``argv``, which must succeed and print a JSON document as its last line (what it
        printed before, a library's chatter, is passed over); return the parsed document."""
        proc = self.run(argv, paths, cwd=cwd, **env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def cli(
        self, *args: str, paths: tuple[Path, ...] = (), **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``python -m tenferro_host ARGS``."""
        return self.run([sys.executable, "-m", "tenferro_host", *args], paths, **env)

    def pytest(
        self, *args: str, paths: tuple[Path, ...] = (), **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``python -m pytest -q -p no:cacheprovider ARGS`` (quiet, and no cache written into
        the directory under test)."""
        return self.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], paths, **env
        )

    def run(
        self,
        argv: list[str],
        paths: tuple[Path, ...] = (),
        *,
        cwd: Path | None = None,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        """Run the command ``argv`` (in ``cwd``, default this process's directory)."""
        return subprocess.run(
            argv,
            cwd=cwd,
            env=self.env(paths, **env),
            capture_output=True,
            text=True,
            timeout=300,
        )

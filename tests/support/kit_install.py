"""Installing what the kit's tests need: fixture distributions and scaffolded packages.

(A helper module, not a conftest: pytest loads ``tests/test*/conftest.py`` at start-up, and a
second module named ``conftest`` there clashes with ``tests/conftest.py``.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.pip_target import pip_install_target

KIT_FIXTURES = Path(__file__).parents[1] / "fixtures" / "kit"


def install_kit_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory (for PYTHONPATH) holding the installed kit fixture distributions."""
    root = tmp_path_factory.mktemp("kit_dists")
    shutil.copytree(KIT_FIXTURES, root / "src")  # builds write egg-info next to the sources
    pip_install_target(sorted((root / "src").iterdir()), root / "site")
    return root / "site"

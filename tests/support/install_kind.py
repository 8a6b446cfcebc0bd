"""How a distribution is installed, read off where its files lie (not from its metadata).

The tests of the ``plugins`` table and of ``plugin_source`` compare the install kind the host
reads from PEP 610's ``direct_url.json`` with this independent observation, so they hold for an
editable checkout (``scripts/setup``) and for installed wheels (``scripts/gpu-tests``) alike.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path


def install_kind(dist: str, module_file: str) -> str:
    """``editable`` when ``module_file`` lies outside the directory ``dist`` is installed in (an
    editable install runs its source tree), else ``installed``."""
    site = Path(str(metadata.distribution(dist).locate_file(""))).resolve()
    return "installed" if Path(module_file).resolve().is_relative_to(site) else "editable"

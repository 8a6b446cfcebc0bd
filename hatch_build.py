"""Builds the compiled planned call (``tenferro_host/provider/_ccall.c`` and its XLA FFI entry,
``_ccall_xla.c``), an optional extension.

Two callers, one compile: hatchling's build hook (a wheel carries the extension and is tagged for
its Python and platform; an editable install builds it in place) and ``python hatch_build.py``,
which ``scripts/setup`` runs to build it in place when its source changed. Without a C compiler
or Python's headers nothing fails: the wheel is pure Python, the package runs its pure-Python
call (the reference) and ``tenferro-host caps`` says why. The module records the hash of the
source it was built from; the package refuses a module built from another source.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script (scripts/setup): hatchling is only the build's
    BuildHookInterface = object  # type: ignore[assignment,misc]

ROOT = Path(__file__).resolve().parent
#: the module's sources, compiled together (``_ccall.c`` defines the module)
SOURCES = tuple(ROOT / "tenferro_host" / "provider" / n for n in ("_ccall.c", "_ccall_xla.c"))
MODULE = "tenferro_host/provider/_ccall" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def source_hash(sources: tuple[Path, ...] = SOURCES) -> str:
    """What a built module must record to be loaded (also computed by the package)."""
    return hashlib.sha256(b"".join(s.read_bytes() for s in sources)).hexdigest()[:16]


def compile_extension(out: Path) -> str | None:
    """Compile the extension to ``out``; None when built, else why not (no exception)."""
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        return f"Python's headers are missing ({include}/Python.h)"
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    command = [
        *cc,
        "-O2",
        "-fPIC",
        "-shared",
        "-std=c11",
        "-Wall",
        f"-I{include}",
        f'-DSOURCE_HASH="{source_hash()}"',
        *map(str, SOURCES),
        "-o",
        str(out),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"no C compiler ({cc[0]}: {exc.strerror})"
    if done.returncode != 0:
        return f"{cc[0]} failed: {done.stderr.strip()[-2000:]}"
    return None


def build_in_place() -> str | None:
    """Build the module next to its source unless the one there was built from it."""
    target = ROOT / MODULE
    stamp = target.with_suffix(".hash")
    if target.exists() and stamp.exists() and stamp.read_text() == source_hash():
        return None
    why = compile_extension(target)
    if why is None:
        stamp.write_text(source_hash())
    return why


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc]
    """hatchling's hook: a wheel with the extension (tagged for this Python and platform)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile before the wheel is assembled (in place for an editable install)."""
        if version == "editable":
            why = build_in_place()
        else:
            out = Path(tempfile.mkdtemp()) / Path(MODULE).name
            why = compile_extension(out)
            if why is None:
                build_data["force_include"][str(out)] = MODULE
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
        if why is not None:
            print(f"tenferro-host: the compiled call is not built: {why}", file=sys.stderr)


if __name__ == "__main__":
    reason = build_in_place()
    if reason is not None:
        print(f"[build] the compiled call is not built (pure Python): {reason}", file=sys.stderr)

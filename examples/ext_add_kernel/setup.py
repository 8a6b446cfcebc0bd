"""Build step of ext_add_kernel: precompile kernel.cu into a fatbin when nvcc is present.

The fatbin holds SASS for sm_80 and sm_90 plus compute_90 PTX (``-gencode``); a small
``build_info.json`` next to it records what was built and by which nvcc. Without nvcc the
build info says so and the ``cuda-raw`` variant compiles the same source with NVRTC at run
time. Works for wheels (files go to the build directory) and editable installs (files go next
to the sources, which editable installs import from). Set ``EXT_ADD_KERNEL_NO_NVCC=1`` to skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PACKAGE = "ext_add_kernel"
GENCODE = (
    "arch=compute_80,code=sm_80",
    "arch=compute_90,code=sm_90",
    "arch=compute_90,code=compute_90",
)


def build_kernels(source_dir: Path, out_dir: Path) -> dict[str, object]:
    """Run nvcc if available; return the build info that was written to ``out_dir``."""
    nvcc = shutil.which("nvcc")
    info: dict[str, object] = {"fatbin": None, "gencode": [], "nvcc": None, "reason": None}
    if os.environ.get("EXT_ADD_KERNEL_NO_NVCC"):
        info["reason"] = "EXT_ADD_KERNEL_NO_NVCC is set"
    elif nvcc is None:
        info["reason"] = "nvcc not found at build time; NVRTC compiles kernel.cu at run time"
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / "add_kernel.fatbin"
        cmd = [
            nvcc,
            "-fatbin",
            *[f"-gencode={g}" for g in GENCODE],
            str(source_dir / "kernel.cu"),
            "-o",
            str(target),
        ]
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
        subprocess.run(cmd, check=True)
        release = [ln for ln in version.stdout.splitlines() if "release" in ln]
        info.update(
            fatbin=target.name,
            gencode=list(GENCODE),
            nvcc=(release or version.stdout.strip().splitlines())[-1].strip(),
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


class BuildPyWithKernels(build_py):
    """build_py that also precompiles the CUDA kernels (wheel and editable builds)."""

    def run(self) -> None:
        """Build as usual, then compile the kernels into the build (or the sources, editable)."""
        super().run()
        source_dir = Path(__file__).parent / PACKAGE
        editable = getattr(self, "editable_mode", False)
        out_dir = source_dir if editable else Path(self.build_lib) / PACKAGE
        build_kernels(source_dir, out_dir)


setup(cmdclass={"build_py": BuildPyWithKernels})

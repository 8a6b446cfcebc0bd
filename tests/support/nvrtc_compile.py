"""NVRTC for the codegen tests: compile generated CUDA C for sm_90 (no GPU needed), skipping
with the reason where NVRTC is not installed or not usable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        pytest.skip(
            f"NVRTC is not installed (pip install 'nvidia-cuda-nvrtc==13.0.*' cuda-bindings): {exc}"
        )
    result, _major, _minor = nvrtc.nvrtcVersion()
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        pytest.skip(f"NVRTC is not usable: {result}")
    return nvrtc


@contextmanager
def _compiled(source: str, *options: bytes) -> Iterator[tuple[Any, Any]]:
    """NVRTC and its program of ``source`` compiled for sm_90 with ``options``, or fail with
    its log (and the source)."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    result, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"dsl.cu", 0, [], [])
    assert result == ok
    try:
        flags = [b"--gpu-architecture=sm_90", *options]
        (compiled,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
        assert compiled == ok, _log(nvrtc, prog) + "\n" + source
        yield nvrtc, prog
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc: Any, prog: Any) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.decode(errors="replace").rstrip("\0 ")


def compile_sm90(source: str) -> int:
    """Compile to a CUBIN for sm_90; return its size, or fail with the NVRTC log."""
    with _compiled(source) as (nvrtc, prog):
        result, cubin_size = nvrtc.nvrtcGetCUBINSize(prog)
        assert result == nvrtc.nvrtcResult.NVRTC_SUCCESS
        return int(cubin_size)


def ptxas_report(source: str) -> str:
    """ptxas's report of the sm_90 compile of ``source`` (registers, stack frame, spills), or
    fail with the NVRTC log."""
    with _compiled(source, b"--ptxas-options=-v", b"-diag-suppress=177") as (nvrtc, prog):
        return _log(nvrtc, prog)


def ptx_sm90(source: str) -> str:
    """The PTX NVRTC makes of ``source`` for sm_90 (what a test reads the instructions of)."""
    with _compiled(source, b"-diag-suppress=177") as (nvrtc, prog):
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
        return ptx.decode().rstrip("\0")

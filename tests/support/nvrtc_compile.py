"""NVRTC for the codegen tests: compile generated CUDA C for sm_90 (no GPU needed), skipping
with the reason where NVRTC is not installed or not usable."""

from __future__ import annotations

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


def compile_sm90(source: str) -> int:
    """Compile to a CUBIN for sm_90; return its size, or fail with the NVRTC log."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    result, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"dsl.cu", 0, [], [])
    assert result == ok
    try:
        options = [b"--gpu-architecture=sm_90"]
        (compiled,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        assert compiled == ok, log.decode() + "\n" + source
        result, cubin_size = nvrtc.nvrtcGetCUBINSize(prog)
        assert result == ok
        return int(cubin_size)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def ptxas_report(source: str) -> str:
    """ptxas's report of the sm_90 compile of ``source`` (registers, stack frame, spills), or
    fail with the NVRTC log."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    result, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"dsl.cu", 0, [], [])
    assert result == ok
    try:
        options = [b"--gpu-architecture=sm_90", b"--ptxas-options=-v", b"-diag-suppress=177"]
        (compiled,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        text = log.decode(errors="replace").rstrip("\0 ")
        assert compiled == ok, text + "\n" + source
        return text
    finally:
        nvrtc.nvrtcDestroyProgram(prog)

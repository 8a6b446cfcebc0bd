"""NVRTC writes only into buffers the host owns: the interpreter's shared objects stay intact.

CPython caches one-byte ``bytes`` objects; ``b" " * 1`` *is* that cached object, so a C call
that writes into it turns every later one-byte space into NUL. Each check runs in a fresh
interpreter so a regression cannot corrupt the test process itself, and each compares freshly
encoded text with integers (``bytes([32])`` would compare the shared object with itself).
The persistent kernel cache is off there: a cached image would skip the NVRTC calls under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("cuda.bindings.nvrtc")

CLEAN = 'extern "C" __global__ void k() {}'
NOISY = 'extern "C" __global__ void k() { int unused = 1; }'  # a warning: a non-empty log
BROKEN = 'extern "C" __global__ void k() { nope; }'

_SCRIPT = textwrap.dedent(
    """
    import io, sys
    from tenferro_host.cuda import raw
    from tenferro_host.errors import CompileError

    source, arch = sys.argv[1], sys.argv[2]
    try:
        image = raw.nvrtc_compile(source, raw.NvrtcOptions(arch=arch))
        assert isinstance(image.data, bytes) and image.data, "no image"
    except CompileError as exc:
        assert exc.log, "a failed compile keeps its log"
    for code in range(128):
        assert chr(code).encode()[0] == code, f"one-byte object {code} corrupted"
    assert " ".encode()[0] == 32
    sink = io.StringIO()
    print("a b", file=sink)
    assert sink.getvalue().encode() == bytes([97, 32, 98, 10]), repr(sink.getvalue())
    print("intact")
    """
)


@pytest.mark.parametrize("arch", ["sm_90", "compute_90"])
@pytest.mark.parametrize("source", [CLEAN, NOISY, BROKEN], ids=["clean", "noisy", "broken"])
def test_compile_leaves_interpreter_one_byte_objects_intact(source: str, arch: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, source, arch],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TENFERRO_CACHE": "off"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "intact"

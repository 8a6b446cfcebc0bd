"""The after-every-module check notices a corrupted interpreter (what the NVRTC bug did)."""

from __future__ import annotations

from support import TESTS
from support.process_health import cuda_problems, interpreter_problems

# Writes a NUL into CPython's shared one-byte object b" ", as NVRTC once did through b" " * 1.
CORRUPT = """
import ctypes, sys
from support.process_health import interpreter_problems
shared = b" " * 1
ctypes.memset(id(shared) + bytes.__basicsize__ - 1, 0, 1)
problems = interpreter_problems()
ctypes.memset(id(shared) + bytes.__basicsize__ - 1, 32, 1)
print(problems)
"""


def test_a_sound_process_has_no_problems():
    assert interpreter_problems() == []
    assert cuda_problems() == []


def test_a_corrupted_one_byte_object_is_reported(subproc):
    proc = subproc.python(CORRUPT, (TESTS,))
    assert proc.returncode == 0, proc.stderr
    assert "one-byte object 32 corrupted" in proc.stdout
    assert "print wrote" in proc.stdout

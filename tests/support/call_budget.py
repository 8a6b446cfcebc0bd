"""What an op call costs in Python, counted (never timed): calls and the files they run in.

``calls_per_op`` is cProfile's count per call (Python and C calls, as the budgets of
docs/measurements/op-call-cost.md count them); ``call_trace`` follows one call event by event
(``sys.setprofile``, Python calls only, the calling test module left out): the files, how often
consecutive calls switch file, and how often each file is entered. ``library`` names the
outside library a file belongs to where its internals count as one unit (wgpu-py is Python:
its own files are not the project's).
"""

from __future__ import annotations

import cProfile
import itertools
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenferro_host.benchmarks.timing import calls_counted


def calls_per_op(fn: Callable[[], Any], n: int = 100) -> float:
    """cProfile's call count of ``fn()``, per call, over ``n`` calls."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        fn()
    profile.disable()
    return calls_counted(profile) / n


def _short(f: str) -> str:
    path = Path(f)
    return str(path.relative_to(path.parents[1])) if len(path.parents) > 1 else f


def call_trace(
    fn: Callable[[], Any], caller: str, library: Callable[[str], str | None] = lambda f: None
) -> tuple[Counter[str], int, Counter[str]]:
    """(calls per file, switches between consecutive calls' files, entries per file) of one
    ``fn()``; calls in ``caller`` (the test module's ``__file__``) are left out, and a file for
    which ``library(file)`` gives a name counts as that name."""
    files: list[str] = []

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename != caller:
            name = frame.f_code.co_filename
            files.append(library(name) or name)

    sys.setprofile(record)
    try:
        fn()
    finally:
        sys.setprofile(None)
    switches = sum(1 for a, b in itertools.pairwise(files) if a != b)
    runs = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
    return Counter(map(_short, files)), switches, Counter(map(_short, runs))

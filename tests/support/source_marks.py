"""Where a marker stands in source: the line (and column) that a located error must name.

Kernels and tests mark the line an error is about with a comment (``# MARK name``, ``# ERR``)
or name a fragment of the line's code; :func:`marker_position` finds it in a function's, a
kernel's (its Python function) or a module's source, so a test does not hard-code lines.
"""

from __future__ import annotations

import inspect
import re
from typing import Any


def marker_position(source: Any, marker: str) -> tuple[int, int]:
    """(absolute line, column) of the first occurrence of ``marker`` in ``source``'s code (a
    function, a ``@K.kernel`` or a module). A marker ending in a name character matches only
    where no name character follows (``# MARK unwritten`` is not ``# MARK unwritten-atomic``)."""
    lines, start = inspect.getsourcelines(getattr(source, "__wrapped__", source))
    end = r"(?![\w-])" if re.match(r"[\w-]", marker[-1:]) else ""
    pattern = re.compile(re.escape(marker) + end)
    for k, text in enumerate(lines):
        found = pattern.search(text)
        if found is not None:
            return max(start, 1) + k, found.start()
    raise AssertionError(f"no {marker!r} in the source of {source!r}")


def marker_line(source: Any, marker: str) -> int:
    """The absolute line of ``marker`` in ``source``'s code (:func:`marker_position`)."""
    return marker_position(source, marker)[0]

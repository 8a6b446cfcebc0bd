"""What keeps an object alive, for a failure's message: its referrers, a few levels up."""

from __future__ import annotations

import gc
import types
from pathlib import Path


def referrers(obj: object, depth: int = 6, width: int = 3) -> str:
    """``obj <- [its referrers <- [theirs ...]]``, ``depth`` levels up and ``width`` per level
    (frames named by function and line; what this walk makes itself left out)."""
    mine: set[int] = set()

    def name(o: object) -> str:
        if isinstance(o, types.FrameType):
            return f"frame {o.f_code.co_name} ({Path(o.f_code.co_filename).name}:{o.f_lineno})"
        if isinstance(o, (list, tuple, dict)):
            return f"{type(o).__name__} of {len(o)}"
        return type(o).__name__

    def own(r: object) -> bool:
        return (
            id(r) in mine
            or isinstance(r, types.GeneratorType)
            or (isinstance(r, types.FrameType) and r.f_code.co_name in ("tree", "referrers"))
        )

    def tree(o: object, level: int) -> str:
        found = gc.get_referrers(o)
        up = [r for r in found if not own(r)]
        first = up[:width]
        mine.update((id(found), id(up), id(first), id(o)))
        if level == 0 or not first:
            return name(o)
        return f"{name(o)} <- [{'; '.join([tree(r, level - 1) for r in first])}]"

    return tree(obj, depth)

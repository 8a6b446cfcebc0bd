"""Asynchronous copies in the cooperative kernels of :mod:`dsl_fuzz`.

Two of every three cooperative kernels (those with shared arrays) also stage the float input
``x`` in static shared arrays with ``K.copy_async``: one or two copy groups, each unit copying
one run of 4, 8 or 16 bytes (1 to 8 elements of the kernel's float type) from a rotated place
of ``x``, a unit past the runs copying nothing. Each group is committed; with two groups a
``K.wait_copies(1)`` lets a unit read its own run of the first (no barrier needed: it copied
it), then ``K.wait_copies(0)`` and a barrier, after which every unit reads another unit's
element of each group. The reads become ``ca``, a float that :mod:`dsl_fuzz` adds to ``c1``
(correctly rounded sums only, so every target must give the same bits).

All of it is drawn from a random stream of its own, so the rest of each kernel stays what it was.
"""

from __future__ import annotations

import random


def _group(rng: random.Random, itemsize: int, units: int, length: int) -> tuple[int, int, int]:
    """One group's run length (elements), how many units copy one, and the rotation of ``x``."""
    counts = [b // itemsize for b in (4, 8, 16) if b >= itemsize]
    count = rng.choice(counts)
    runs = min(units, length // count)
    return count, runs, rng.randrange(runs)


def copies(
    float_type: str, itemsize: int, units: int, length: int, rng: random.Random
) -> list[str]:
    """The lines (top level of a kernel of float type ``float_type``, after the cooperative
    prelude, in cubes of ``units`` units, ``x`` of ``length`` elements) that define ``ca``."""
    F = float_type
    groups = [_group(rng, itemsize, units, length) for _ in range(rng.randint(1, 2))]
    lines = [f"ca = K.{F}(0)"]  # u: the prelude's K.UNIT_POS
    for g, (count, runs, shift) in enumerate(groups):
        lines += [
            f"ac{g} = K.shared(K.{F}, {count * runs})",
            f"if u < {runs}:",
            f"    K.copy_async(ac{g}, u * {count}, x, ((u + {shift}) % {runs}) * {count}, {count})",
            "K.commit_copies()",
        ]
    if len(groups) == 2:
        count, runs, _ = groups[0]
        lines += [
            "K.wait_copies(1)",
            f"if u < {runs}:",
            f"    ca = ca + ac0[u * {count} + {rng.randrange(count)}]",
        ]
    lines += ["K.wait_copies(0)", "K.sync_cube()"]
    for g, (count, runs, _) in enumerate(groups):
        n = count * runs
        lines.append(f"ca = ca + ac{g}[(u * {rng.randrange(1, n, 2)} + {rng.randrange(n)}) % {n}]")
    return lines


__all__ = ["copies"]

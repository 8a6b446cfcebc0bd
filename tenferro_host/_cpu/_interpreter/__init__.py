"""The CPU backend's DSL target (its private executor): runs a specialization on numpy,
vectorised over every thread of a launch.

Each local is a numpy array with one lane per thread. Divergent ``if``/``else`` run each branch
under a mask; loops iterate while any lane still runs; ``break``, ``continue`` and ``return``
clear lanes from per-loop / per-kernel masks. Masked-off lanes never read or write memory.

Semantics match the GPU targets: integers wrap around (u32 indices too), ``//`` and ``%``
truncate toward zero, f16/f32 arithmetic stays in its type (each operation rounds), float
division by zero gives inf/nan. Where a GPU would silently misbehave the interpreter raises a
typed :class:`ValidationError` naming kernel, file and line: an out-of-bounds array access by an
active thread (each index of ``a[i, j]`` against its own dimension, :class:`ir.AxisIndex`; a
linear index against the view's extent, ``1 + sum((shape[k]-1) * stride[k])``, which is its
length on the compact views that take one), an integer division or remainder by zero, and a
``range`` step of zero. A cube's shared arrays fit :data:`ir.CUBE_SHARED_BYTES`, checked before
they are allocated.

Cooperation (shared arrays, ``K.sync_cube()``, atomics): the units of a cube run in lock-step
between barriers, every statement for all of them, which is one legal GPU schedule. What a GPU
hides is a :class:`CooperationError` naming the line: a barrier that some units of a cube do not
reach (:class:`DivergentBarrierError`: it sits in divergent control flow, or units returned), two
units of a cube touching one shared element with no barrier between, one of them writing (atomics
among themselves excepted; :class:`SharedRaceError`), and a read of a shared element no unit of
the cube wrote (:class:`UnwrittenSharedReadError`). Atomics on one element apply in lane order.
Subgroup operations (:mod:`._subgroup`) have the barrier's rule per subgroup.
Matrix fragments are each warp's (:mod:`._matrix` checks that warps use them whole).
"""

from __future__ import annotations

from ._machine import ArrayArg, Grid, run

__all__ = ["ArrayArg", "Grid", "run"]

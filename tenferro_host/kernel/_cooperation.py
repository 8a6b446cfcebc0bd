"""What a cube's units must not do together (shared memory, barriers, subgroups, fragments):
the language's cooperation rules as the errors that name them. GPUs leave a broken rule
undefined; the CPU interpreter (``tenferro_host._cpu._interpreter``) checks and raises these."""

from __future__ import annotations

from ..errors import ValidationError


class CooperationError(ValidationError):
    """A cube's units misuse shared memory or barriers (detected by the interpreter)."""


class DivergentBarrierError(CooperationError):
    """``K.sync_cube()`` reached by some but not all units of a cube."""


class SharedRaceError(CooperationError):
    """Two units touch one shared element between barriers and one of them writes."""


class UnwrittenSharedReadError(CooperationError):
    """A read (or atomic) of a shared element no unit of the cube has written."""


class UnwaitedCopyError(CooperationError):
    """A read or write of a shared element whose asynchronous copy (``K.copy_async``) the
    copying unit has not waited for (``K.commit_copies``, ``K.wait_copies``)."""


class DivergentSubgroupError(CooperationError):
    """A subgroup operation reached by some but not all units of a subgroup."""


class DivergentFragmentError(CooperationError):
    """A fragment statement reached by some but not all units of a warp, or with operands
    (start, leading dimension, fill value) that differ between them."""


class UnwrittenFragmentError(CooperationError):
    """A fragment used before its warp filled or loaded it."""

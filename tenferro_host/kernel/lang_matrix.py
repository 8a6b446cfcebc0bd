"""The names of matrix fragments (``K.fragment``, ``K.mma`` ...): markers like :mod:`.lang`'s,
recognised by the front-end; :mod:`tenferro_host.kernel.ir._matrix` states the semantics.

>>> from tenferro_host import kernel as K
>>> K.MATRIX_A, K.ROW_MAJOR
(K.MATRIX_A, K.ROW_MAJOR)
"""

from __future__ import annotations

from dataclasses import dataclass

from .lang import Intrinsic, KName


@dataclass(frozen=True, repr=False)
class MatrixMarker(KName):
    """A compile-time argument of ``K.fragment``: a use (``K.MATRIX_A``, ``K.MATRIX_B``,
    ``K.ACCUMULATOR``) or a memory layout (``K.ROW_MAJOR``, ``K.COL_MAJOR``); ``value`` is the
    IR's name for it."""

    kind: str  # "use" | "layout"
    value: str


MATRIX_A = MatrixMarker("MATRIX_A", "use", "a")
MATRIX_B = MatrixMarker("MATRIX_B", "use", "b")
ACCUMULATOR = MatrixMarker("ACCUMULATOR", "use", "accumulator")
ROW_MAJOR = MatrixMarker("ROW_MAJOR", "layout", "row")
COL_MAJOR = MatrixMarker("COL_MAJOR", "layout", "col")

# ``f = K.fragment(use, T, m, n, k, layout)`` declares a warp's fragment (top level of a kernel);
# ``K.fill_fragment(f, v)``, ``K.load_fragment(f, array, start, ld)``,
# ``K.store_fragment(array, start, f, ld)`` and ``K.mma(d, a, b, c)`` are statements
fragment = Intrinsic("fragment", 6)
fill_fragment = Intrinsic("fill_fragment", 2)
load_fragment = Intrinsic("load_fragment", 4)
store_fragment = Intrinsic("store_fragment", 4)
mma = Intrinsic("mma", 4)

MATRIX_STATEMENTS = ("fill_fragment", "load_fragment", "store_fragment", "mma")
"""The intrinsics that are statements of their own."""

"""The input shapes the conformance suite tries, drawn from the op's declaration.

An op that declares its shapes (``Signature.shapes``) is tried, for every number of variadic
dimensions, on an empty size in each place, all ones, odd sizes, sizes that are no multiple
of a cube side and a large shape (>= 100,000 elements). An op that declares none gets every
input of one shape from :data:`SHAPES` (a shape its reference refuses is not the op's) and the
1-D and 2-D :data:`VIEWS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _shapes
from ..ops import OpSpec

Shape = tuple[int, ...]

#: Input shapes of an op that declares none: empty, single, odd, 2-D, empty 2-D, large 2-D,
#: large 1-D.
SHAPES: tuple[Shape, ...] = ((0,), (1,), (7,), (3, 5), (0, 4), (129, 257), (100_003,))
#: Shapes of an undeclared op for the checks that call it once (sessions, compile, launch
#: arguments): the first its reference takes.
PROBE_SHAPES: tuple[Shape, ...] = ((7,), (3, 5), (1,), (4, 3, 2), ())
#: Non-compact views of an undeclared op: name -> (base shape, view); applies to numpy too.
VIEWS: dict[str, tuple[Shape, Callable[[Any], Any]]] = {
    "transposed": ((5, 3), lambda t: t.T),
    "sliced with a step": ((11,), lambda t: t[1:10:2]),
    "negative steps": ((9,), lambda t: t[::-1]),
    "2-D sliced": ((6, 7), lambda t: t[1:5, ::2]),
}


@dataclass(frozen=True)
class ShapeSet:
    """One shape per input, and the kind of set (``empty``, ``odd``, ``large`` ...)."""

    kind: str
    shapes: tuple[Shape, ...]

    @property
    def large(self) -> bool:
        """Some input has at least LARGE_ELEMENTS elements (tried in one dtype only)."""
        return max((math.prod(s) for s in self.shapes), default=0) >= _shapes.LARGE_ELEMENTS

    def __str__(self) -> str:
        return ", ".join(map(str, self.shapes)) if len(self.shapes) != 1 else str(self.shapes[0])


@dataclass(frozen=True)
class ViewCase:
    """Base shapes to upload and the view of each that the variant gets."""

    name: str
    bases: tuple[Shape, ...]
    views: tuple[Callable[[Any], Any], ...]

    def apply(self, bases: list[Any]) -> list[Any]:
        """The views of ``bases`` (numpy arrays or tensors alike)."""
        return [view(b) for view, b in zip(self.views, bases, strict=True)]


def value_sets(spec: OpSpec, attrs: Mapping[str, Any]) -> list[ShapeSet]:
    """Every shape set of the ``values`` check."""
    sig = spec.signature
    decl = sig.declared_shapes(attrs)
    if decl is None:
        return [ShapeSet("fixed", (s,) * len(sig.inputs)) for s in SHAPES]
    return [
        ShapeSet(kind, tuple(_shapes.instantiate(decl, sig.inputs, binding)))
        for kind, binding in _shapes.suite_bindings(decl, sig.inputs)
    ]


def probe_sets(spec: OpSpec, attrs: Mapping[str, Any]) -> list[ShapeSet]:
    """Small shape sets for the checks that call the op once per set, odd sizes first."""
    sig = spec.signature
    if sig.declared_shapes(attrs) is None:
        return [ShapeSet("fixed", (s,) * len(sig.inputs)) for s in PROBE_SHAPES]
    order = {"odd": 0, "non-multiple": 1, "one": 2, "empty": 3}
    small = [s for s in value_sets(spec, attrs) if s.kind in order]
    return sorted(small, key=lambda s: order[s.kind])


def _transposed(s: Shape) -> tuple[Shape, Callable[[Any], Any]] | None:
    return (tuple(reversed(s)), lambda t: t.T) if len(s) >= 2 else None


def _stepped(s: Shape) -> tuple[Shape, Callable[[Any], Any]] | None:
    return ((2 * s[0] + 1, *s[1:]), lambda t: t[1::2]) if len(s) >= 1 else None


def _reversed(s: Shape) -> tuple[Shape, Callable[[Any], Any]] | None:
    return (s, lambda t: t[::-1]) if len(s) >= 1 and s[0] > 1 else None


def _sliced_2d(s: Shape) -> tuple[Shape, Callable[[Any], Any]] | None:
    if len(s) < 2:
        return None
    return (s[0] + 2, 2 * s[1], *s[2:]), lambda t: t[1 : s[0] + 1, ::2]


_DECLARED_VIEWS = {
    "transposed": _transposed,
    "sliced with a step": _stepped,
    "negative steps": _reversed,
    "2-D sliced": _sliced_2d,
}


def view_cases(spec: OpSpec, attrs: Mapping[str, Any]) -> list[ViewCase]:
    """The ``views`` check's inputs: for a declared op, views of its odd shapes (an input a
    view cannot apply to stays compact)."""
    sig = spec.signature
    decl = sig.declared_shapes(attrs)
    if decl is None:
        n = len(sig.inputs)
        return [ViewCase(name, (base,) * n, (view,) * n) for name, (base, view) in VIEWS.items()]
    odd = probe_sets(spec, attrs)[0]
    out = []
    for name, make in _DECLARED_VIEWS.items():
        made = [make(s) for s in odd.shapes]
        if all(m is None for m in made):
            continue
        bases = tuple(s if m is None else m[0] for s, m in zip(odd.shapes, made, strict=True))
        views = tuple((lambda t: t) if m is None else m[1] for m in made)
        out.append(ViewCase(name, bases, views))
    return out


__all__ = [
    "PROBE_SHAPES",
    "SHAPES",
    "VIEWS",
    "ShapeSet",
    "ViewCase",
    "probe_sets",
    "value_sets",
    "view_cases",
]

"""Declared input shapes: each input's dimensions named by symbols an op's inputs share.

A declaration maps every input name to a tuple of dimensions: a symbol (``"m"``), a fixed
size (``3``) or one variadic symbol (``"*batch"``: any number of dimensions, the same ones in
every input that names it). A symbol named by several inputs is one size (``a: (m, k)`` and
``b: (k, n)`` share ``k``). :func:`bind` reads the symbols off concrete shapes,
:func:`instantiate` makes shapes from symbol values, and :func:`suite_bindings` lists the
values the conformance suite tries.

>>> decl = {"a": ("m", "k"), "b": ("k", "n")}
>>> instantiate(decl, ("a", "b"), {"m": 2, "k": 3, "n": 4})
[(2, 3), (3, 4)]
>>> bind(decl, ("a", "b"), [(2, 3), (3, 4)])
{'m': 2, 'k': 3, 'n': 4}
>>> bind(decl, ("a", "b"), [(2, 3), (4, 4)]) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .errors import ValidationError

Dim = str | int
#: input name -> its dimensions.
ShapeDecl = Mapping[str, tuple[Dim, ...]]
#: symbol -> size (a tuple of sizes for a variadic symbol, named without its ``*``).
Binding = dict[str, Any]

#: Elements of the suite's large shape: beyond one cube of any backend, in every rank.
LARGE_ELEMENTS = 100_000
#: Sizes of the suite's "non-multiple" shape: none is a multiple of a typical cube side.
NON_MULTIPLES = (33, 17, 5, 3)


def _is_variadic(d: Dim) -> bool:
    return isinstance(d, str) and d.startswith("*")


def symbols(decl: ShapeDecl) -> tuple[list[str], list[str]]:
    """(plain symbols, variadic symbols without ``*``), each in order of first appearance."""
    plain: list[str] = []
    variadic: list[str] = []
    for dims in decl.values():
        for d in dims:
            if isinstance(d, str):
                names, name = (variadic, d[1:]) if _is_variadic(d) else (plain, d)
                if name not in names:
                    names.append(name)
    return plain, variadic


def validate(op: str, inputs: Sequence[str], decl: Any) -> None:
    """ValidationError naming ``op`` unless ``decl`` declares every input's dimensions."""

    def refuse(message: str) -> None:
        raise ValidationError(f"op {op!r}: shapes {message}", argument="shapes", op=op)

    if not isinstance(decl, Mapping):
        refuse(f"must map each input to its dimensions, got {type(decl).__name__}")
    if set(decl) != set(inputs):
        refuse(
            f"names {sorted(map(str, decl))}; declare every input ({', '.join(inputs)}), "
            "e.g. {'a': ('m', 'k'), 'b': ('k', 'n')}"
        )
    for name, dims in decl.items():
        if not isinstance(dims, tuple):
            refuse(f"of {name!r} must be a tuple of dimensions, got {dims!r}")
        for d in dims:
            ok_int = isinstance(d, int) and not isinstance(d, bool) and d >= 0
            ok_str = isinstance(d, str) and d.lstrip("*").isidentifier() and d.count("*") <= 1
            if not (ok_int or ok_str):
                refuse(
                    f"of {name!r}: {d!r} is not a dimension; use a symbol ('m'), a size >= 0 "
                    "or one variadic symbol ('*batch')"
                )
        if sum(_is_variadic(d) for d in dims) > 1:
            refuse(f"of {name!r} has more than one variadic symbol: {dims}")
    plain, variadic = symbols(decl)
    clash = set(plain) & set(variadic)
    if clash:
        refuse(f"use {sorted(clash)} both as a symbol and as a variadic symbol")


def validate_sample(op: str, decl: ShapeDecl, sample: Any) -> None:
    """ValidationError unless ``sample`` gives every symbol of ``decl`` a size."""
    plain, variadic = symbols(decl)
    if not isinstance(sample, Mapping):
        raise ValidationError(
            f"op {op!r}: a sample shape must map symbols to sizes, got {sample!r}",
            argument="samples",
            op=op,
        )
    for name in plain + variadic:
        value = sample.get(name)
        sizes = value if name in variadic and isinstance(value, tuple) else (value,)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes):
            raise ValidationError(
                f"op {op!r}: sample {dict(sample)} gives {name!r} {value!r}; give every symbol "
                f"({', '.join(plain + variadic)}) a size >= 0 (a tuple for a variadic one)",
                argument="samples",
                op=op,
            )


def instantiate(decl: ShapeDecl, inputs: Sequence[str], binding: Binding) -> list[tuple[int, ...]]:
    """The shape of each input (in ``inputs`` order) under ``binding``."""
    shapes = []
    for name in inputs:
        shape: list[int] = []
        for d in decl[name]:
            if isinstance(d, int):
                shape.append(d)
            elif _is_variadic(d):
                shape.extend(binding[d[1:]])
            else:
                shape.append(binding[d])
        shapes.append(tuple(shape))
    return shapes


def bind(
    decl: ShapeDecl, inputs: Sequence[str], shapes: Sequence[tuple[int, ...]]
) -> Binding | None:
    """The symbol values that make ``shapes`` (one per input), or None if none do."""
    binding: Binding = {}

    def agree(name: str, value: Any) -> bool:
        return binding.setdefault(name, value) == value

    for name, shape in zip(inputs, shapes, strict=True):
        dims = decl[name]
        star = next((i for i, d in enumerate(dims) if _is_variadic(d)), None)
        fixed = len(dims) - (star is not None)
        if len(shape) < fixed or (star is None and len(shape) != fixed):
            return None
        tail = len(dims) - 1 - star if star is not None else 0
        for i, d in enumerate(dims):
            if i == star:
                ok = agree(str(d)[1:], tuple(shape[i : len(shape) - tail]))
            else:
                size = shape[i] if star is None or i < star else shape[len(shape) - len(dims) + i]
                ok = size == d if isinstance(d, int) else agree(str(d), size)
            if not ok:
                return None
    return binding


def _patterns(plain: list[str], widths: dict[str, int]) -> Iterator[tuple[str, list[int]]]:
    """(name, sizes) of each value pattern over ``len(plain) + sum(widths)`` slots."""
    slots = len(plain) + sum(widths.values())
    for i in range(slots):
        yield "empty", [0 if j == i else 3 for j in range(slots)]
    yield "one", [1] * slots
    yield "odd", [3 + 2 * j for j in range(slots)]
    yield "non-multiple", [NON_MULTIPLES[j % len(NON_MULTIPLES)] for j in range(slots)]


def _assign(plain: list[str], widths: dict[str, int], sizes: list[int]) -> Binding:
    binding: Binding = dict(zip(plain, sizes, strict=False))
    at = len(plain)
    for name, width in widths.items():
        binding[name] = tuple(sizes[at : at + width])
        at += width
    return binding


def _large(decl: ShapeDecl, inputs: Sequence[str], widths: dict[str, int]) -> Binding:
    """The dimensions of the input of most dimensions at one odd size (not a multiple of 16)
    giving >= LARGE_ELEMENTS elements; symbols that input lacks are 3 (keeps the work small)."""
    plain, _ = symbols(decl)
    small = _assign(plain, widths, [3] * (len(plain) + sum(widths.values())))
    ranks = [len(s) for s in instantiate(decl, inputs, small)]
    widest = inputs[ranks.index(max(ranks))]
    rank = max(max(ranks), 1)
    size = math.ceil(LARGE_ELEMENTS ** (1 / rank))
    size += (size % 2 == 0) + (size % 16 == 0) * 2
    binding = dict(small)
    for d in decl[widest]:
        if _is_variadic(d):
            binding[str(d)[1:]] = (size,) * widths[str(d)[1:]]
        elif isinstance(d, str):
            binding[d] = size
    if math.prod(instantiate(decl, inputs, binding)[ranks.index(max(ranks))]) < LARGE_ELEMENTS:
        # Fixed sizes in the widest input: grow its first symbol until it is large.
        first = next((d for d in decl[widest] if isinstance(d, str) and not _is_variadic(d)), None)
        if first is not None:
            binding[first] = LARGE_ELEMENTS + 3
    return binding


def suite_bindings(decl: ShapeDecl, inputs: Sequence[str]) -> list[tuple[str, Binding]]:
    """(kind, binding) of every shape the suite tries: for each number of variadic dimensions
    (0, 1, 2), an empty size in each place, all ones, odd sizes and sizes that are no multiple
    of a cube side; and a large shape with 0 and 1 variadic dimensions (the one rank of an op
    without variadic symbols)."""
    plain, variadic = symbols(decl)
    widths_options = (0, 1, 2)
    out: list[tuple[str, Binding]] = []
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for width in widths_options if variadic else (0,):
        widths = dict.fromkeys(variadic, width)
        candidates = [
            (kind, _assign(plain, widths, sizes)) for kind, sizes in _patterns(plain, widths)
        ]
        if width <= 1:  # the large shape at the lowest ranks: it costs the interpreter most
            candidates.append(("large", _large(decl, inputs, widths)))
        for kind, binding in candidates:
            key = tuple(instantiate(decl, inputs, binding))
            if key not in seen:
                seen.add(key)
                out.append((kind, binding))
    return out


def default_binding(decl: ShapeDecl, inputs: Sequence[str], elements: int) -> Binding:
    """Every symbol at one size that gives the input of most dimensions about ``elements``
    elements (variadic symbols one dimension) — what ``run`` uses when given no shape."""
    plain, variadic = symbols(decl)
    widths = dict.fromkeys(variadic, 1)
    ones = _assign(plain, widths, [1] * (len(plain) + len(variadic)))
    rank = max([len(s) for s in instantiate(decl, inputs, ones)] + [1])
    size = max(1, round(elements ** (1 / rank)))
    return _assign(plain, widths, [size] * (len(plain) + len(variadic)))


__all__ = [
    "LARGE_ELEMENTS",
    "Binding",
    "ShapeDecl",
    "bind",
    "default_binding",
    "instantiate",
    "suite_bindings",
    "symbols",
    "validate",
    "validate_sample",
]

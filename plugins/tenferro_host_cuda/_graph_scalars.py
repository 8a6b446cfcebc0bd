"""Where a native graph's declared scalars reach its kernels (``cap.scalar`` on CUDA).

A capture's recorded calls are captured again, never launched, once per probe value of each
declared scalar (:func:`probe_values`: another value, zero, a negative one); the kernel nodes of
each probe are compared with the graph's (:func:`scalar_sites`). A parameter that differs is the
scalar's where it holds, in every capture, the scalar's own value in the parameter's C type
(:func:`packed`): a replay with a new value writes it there
(``cuGraphExecKernelNodeSetParams``). A probe that changes which kernels run or their launch
shapes, or a parameter derived from the scalar (``2 * k``, ``max(k, 0)`` seen at a probe value),
keeps the replayed form, and the reason says so. A variant whose kernels depend on the value in
a way none of the probes shows is outside what the probes can see (docs/capture.md).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from tenferro_host import ValidationError

#: The C types a scalar of each Python type is written as, by parameter size.
_FORMATS: dict[type, dict[int, str]] = {
    bool: {1: "<?", 4: "<i", 8: "<q"},
    int: {1: "<b", 2: "<h", 4: "<i", 8: "<q"},
    float: {2: "<e", 4: "<f", 8: "<d"},
}


class Kernel(NamedTuple):
    """One kernel node of a captured graph: its function and launch shape, each parameter's
    bytes, and whether an 8-byte parameter points into the capture's own memory (its arena,
    which another capture allocates elsewhere)."""

    shape: tuple[Any, ...]
    params: list[bytes]
    arena: list[bool]


class Site(NamedTuple):
    """A kernel parameter that holds a declared scalar: node index, parameter index, format."""

    name: str
    node: int
    param: int
    format: str


def probe_values(value: Any) -> tuple[Any, ...]:
    """The values a scalar declared as ``value`` is probed with (each differs from it)."""
    if type(value) is bool:
        return (not value,)
    step, negative = (7, -abs(value) - 3) if type(value) is int else (1.5, -abs(value) - 3.25)
    found = [v for v in (value + step, type(value)(0), negative) if v != value]
    return tuple(dict.fromkeys(found))


def packed(value: Any, size: int) -> tuple[str, bytes] | None:
    """``value`` in the C type of its Python type at ``size`` bytes (format, bytes); None where
    there is none or it does not fit."""
    fmt = _FORMATS[type(value)].get(size)
    data = None if fmt is None else _pack(fmt, value)
    return None if fmt is None or data is None else (fmt, data)


def written_as(name: str, fmt: str, value: Any) -> bytes:
    """Scalar ``name``'s new ``value`` as the kernel parameter of format ``fmt`` holds it
    (ValidationError where it does not fit)."""
    data = _pack(fmt, value)
    if data is None:
        raise ValidationError(
            f"scalar {name!r} = {value!r} does not fit the kernel parameter it reaches "
            f"(struct format {fmt!r})",
            argument=name,
        )
    return data


def _pack(fmt: str, value: Any) -> bytes | None:
    try:
        return struct.pack(fmt, value)
    except (struct.error, OverflowError):
        return None


def scalar_sites(
    graph: list[Kernel], values: dict[str, Any], probes: dict[str, list[tuple[Any, list[Kernel]]]]
) -> list[Site] | str:
    """Each parameter of ``graph`` that holds a declared scalar, from the probes (per scalar:
    each probe value and the kernels its capture made); a str: why the graph cannot follow."""
    sites: list[Site] = []
    owner: dict[tuple[int, int], str] = {}
    for name, runs in probes.items():
        found: set[tuple[int, int]] = set()  # every parameter some probe changed
        for value, kernels in runs:
            if len(kernels) != len(graph) or any(
                a.shape != b.shape for a, b in zip(kernels, graph, strict=True)
            ):
                return (
                    f"scalar {name!r} = {value!r} changes which kernels the graph runs or their "
                    "launch shapes"
                )
            for n, (now, then) in enumerate(zip(kernels, graph, strict=True)):
                found.update(
                    (n, p)
                    for p, (a, b) in enumerate(zip(now.params, then.params, strict=True))
                    if a != b and not (now.arena[p] and then.arena[p])  # not the arena's moving
                )
        for n, p in sorted(found):  # each holds the scalar's own value in every capture
            held = [(values[name], graph[n].params[p])]
            held += [(value, kernels[n].params[p]) for value, kernels in runs]
            as_c = [packed(value, len(data)) for value, data in held]
            if any(c is None or c[1] != data for c, (_, data) in zip(as_c, held, strict=True)):
                return (
                    f"scalar {name!r} reaches a kernel parameter as something other than its "
                    "own value (derived from it, or a type it does not convert to); pass the "
                    "value itself"
                )
            if (n, p) in owner:
                return f"a kernel parameter depends on both {owner[(n, p)]!r} and {name!r}"
            owner[(n, p)] = name
            sites.append(Site(name, n, p, as_c[0][0]))  # type: ignore[index]
    return sites


__all__ = ["Kernel", "Site", "packed", "probe_values", "scalar_sites", "written_as"]

"""Register arrays and unrolled loops in the kernels of :mod:`dsl_fuzz`.

Every third generated kernel also declares, at its top level, a register array
(``K.registers``) of its float type, of its int type, or one of each, shaped 1-D or 2-D (at most
32 elements), and works on it in ``K.static_range`` loops of every form (a stop; a start and a
stop; a step, negative too; empty ones, whose bodies are never lowered): it fills some or all
elements from computed values (the rest stay the zeros they start as), updates them in place
from constant neighbours (``r[e - 1]``, ``r[e + 1, k]``), at constant indices and at run-time
ones (``r[K.u32(v) % r.len]``, ``r[K.abs(v % 4)]`` in the int type), inside ``if`` and inside a
run-time ``for``, and reads them back at constant and run-time indices. A loop's counter meets
a u32 and an i32 operand (as a literal does), another one i32 only (negative values), and a
kernel-level ``return`` may leave from inside an unrolled body (outputs are written last, so the
unit's outputs stay zero). What it computes becomes two terms, ``vf`` (float, correctly rounded
operations only) and ``vi`` (int, wrapping), that :mod:`dsl_fuzz` folds into ``fo`` and ``io``.

All of it is drawn from a random stream of its own, so the rest of each kernel stays what it was.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from support.dsl_fuzz import _Body

MAX_ELEMENTS = 32
FMOD_TRIPS = 8
"""The most copies of an unrolled body whose expressions take a float ``%``: WGSL's exact fmod
is a loop, and llvmpipe's shader compile time grows much faster than their count (32 copies
of ``x % (y % x)``: 23 s, 16: 2.4 s; a 32-trip fill with two fmods ran past 10 minutes)."""


def _shape(rng: random.Random) -> tuple[int, ...]:
    if rng.random() < 0.5:
        return (rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 32]),)
    rows = rng.randint(1, 6)
    return rows, rng.randint(1, min(6, MAX_ELEMENTS // rows))


def _cover(rng: random.Random, d: int) -> tuple[int, ...]:
    """``K.static_range`` arguments whose values are indices of a dimension of ``d`` (all of
    them, or every ``step``-th from some start, forward or backward)."""
    start, step = rng.randrange(d), rng.randint(1, 3)
    args = rng.choice(
        [
            (d,),
            (0, d),
            (d - 1, -1, -1),
            (start, d, step),
            (start, rng.randint(-1, start - 1) if start else -1, -step),
        ]
    )
    assert all(0 <= v < d for v in range(*args)), args
    return args


def _empty(rng: random.Random, d: int) -> tuple[int, ...]:
    """``K.static_range`` arguments giving no trip."""
    args = rng.choice([(d, d), (0, d, -1), (d + 2, 1), (0,), (3, 3, -2)])
    assert not range(*args), args
    return args


def _text(args: tuple[int, ...]) -> str:
    return ", ".join(map(str, args))


class _Registers:
    """The register part of one kernel, written into ``body`` at its top level."""

    def __init__(self, body: _Body) -> None:
        self.body = body
        self.rng = body.rng
        self.F, self.I = body.p.float_type, body.p.int_type
        self.counters = 0  # K.static_range counters e0, e1, ...
        self.runtime_loops = 0  # range counters jr1, jr2, ...
        self.counted = False  # cu and ci computed
        self.arrays: dict[str, tuple[str, tuple[int, ...]]] = {}  # name -> (kind, shape)

    def emit(self, indent: int, text: str) -> None:
        self.body.emit(indent, text)

    def counter(self) -> str:
        self.counters += 1
        return f"e{self.counters - 1}"

    def value(self, kind: str, depth: int, trips: int = 1) -> str:
        """A ``kind`` expression, for an unrolled body copied ``trips`` times."""
        b = self.body
        b.fmod = trips <= FMOD_TRIPS
        try:
            return b.typed(b.fexpr(depth) if kind == "f" else b.iexpr(depth), kind)
        finally:
            b.fmod = True

    def runtime_index(self, name: str) -> str:
        """An index of ``name`` known at run time only, kept in bounds."""
        shape = self.arrays[name][1]
        v = self.value("i", 1)
        if len(shape) == 2 and self.rng.random() < 0.6:
            w = self.value("i", 0)
            return f"K.u32({v}) % {name}.shape[0], K.u32({w}) % {name}.shape[1]"
        if self.I != "u32" and self.rng.random() < 0.4:  # an index of the int type
            size = shape[0] if len(shape) == 1 else f"K.{self.I}({name}.len)"
            return f"K.abs({v} % {size})"
        return f"K.u32({v}) % {name}.len"

    def constant_index(self, name: str) -> str:
        return ", ".join(str(self.rng.randrange(d)) for d in self.arrays[name][1])

    def leaves(self) -> None:
        """Reads of the arrays at constant indices, as leaves of the body's expressions."""
        reads = {n: f"{n}[{self.constant_index(n)}]" for n in self.arrays}
        self.body.f_leaves[:] = [v for n, v in reads.items() if self.arrays[n][0] == "f"]
        self.body.i_leaves[:] = [v for n, v in reads.items() if self.arrays[n][0] == "i"]

    # -------------------------------------------------------- statements

    def loops(
        self, indent: int, shape: tuple[int, ...], cover: bool = True
    ) -> tuple[int, list[str], int]:
        """Nested ``K.static_range`` headers over ``shape``'s indices (empty ranges too when
        ``cover`` is false); the body's indent, the counters and the body's copies."""
        names, trips = [], 1
        for d in shape:
            e = self.counter()
            args = _cover(self.rng, d) if cover or self.rng.random() < 0.7 else _empty(self.rng, d)
            self.emit(indent, f"for {e} in K.static_range({_text(args)}):")
            names.append(e)
            trips *= len(range(*args))
            indent += 1
        return indent, names, trips

    def fill(self, name: str) -> None:
        kind, shape = self.arrays[name]
        b, r = self.body, self.rng
        indent, names, trips = self.loops(1, shape)
        b.loop_vars += names  # K.I(e) in int expressions: the counters are indices, >= 0
        b.f_leaves[:] = [f"K.{self.F}({e})" for e in names]
        index = ", ".join(names)
        if r.random() < 0.5:
            self.emit(indent, f"{name}[{index}] = {self.value(kind, 2, trips)}")
        else:  # the counter typed by the operand it meets, as a literal is
            op = r.choice(["+", "-", "*"])
            value = self.value(kind, 2, trips)
            self.emit(indent, f"{name}[{index}] = {value} {op} {r.choice(names)}")
        del b.loop_vars[-len(names) :]
        b.f_leaves.clear()

    def update(self, name: str) -> None:
        """One in-place update: from a neighbour, at a constant or at a run-time index."""
        kind, shape = self.arrays[name]
        r = self.rng
        k = r.randrange(6)
        indent = 1
        if r.random() < 0.25:
            self.emit(indent, f"if {self.body.cond(1)}:")
            indent += 1
        elif r.random() < 0.2:
            self.runtime_loops += 1
            self.emit(indent, f"for jr{self.runtime_loops} in range({r.randint(1, 3)}):")
            indent += 1
        if k == 0:
            self.emit(indent, f"{name}[{self.constant_index(name)}] += {self.value(kind, 2)}")
        elif k == 1:
            op = r.choice(["+=", "-=", "*="])
            self.emit(indent, f"{name}[{self.runtime_index(name)}] {op} {self.value(kind, 1)}")
        elif k == 5:
            indent, names, trips = self.loops(indent, shape, cover=False)
            index = ", ".join(names)
            value = self.value(kind, 1, trips)
            self.emit(indent, f"{name}[{index}] = {name}[{index}] - {value}")
        else:  # from the previous or the next element along the first dimension
            forward = k <= 3
            first = self.counter()
            args = f"1, {shape[0]}" if forward else f"{shape[0] - 2}, -1, -1"
            self.emit(indent, f"for {first} in K.static_range({args}):")
            indent, rest, _ = self.loops(indent + 1, shape[1:])
            here = ", ".join([first, *rest])
            there = ", ".join([f"{first} {'-' if forward else '+'} 1", *rest])
            if k == 2:
                self.emit(indent, f"{name}[{here}] += {name}[{there}]")
            elif k == 3:
                self.emit(indent, f"{name}[{here}] = K.max({name}[{here}], {name}[{there}])")
            else:
                self.emit(indent, f"{name}[{here}] -= {name}[{there}] * {r.choice(['2', '3'])}")

    def counters_meet_types(self) -> None:
        """``cu`` (u32) and ``ci`` (i32) from unrolled counters meeting both types, and an i32
        one over negative values too."""
        r = self.rng
        self.counted = True
        self.emit(1, "cu = K.u32(0)")
        self.emit(1, "ci = K.i32(0)")
        e = self.counter()
        args = r.choice([(4,), (1, 6), (7, 0, -2), (2, 11, 3), (5, -1, -1), (3, 3)])
        self.emit(1, f"for {e} in K.static_range({_text(args)}):")
        self.emit(2, f"cu = cu * {r.choice(['3', 'K.u32(m[i])'])} + {e}")
        value = self.value("i", 1, len(range(*args)))
        self.emit(2, f"ci = ci {r.choice(['+', '-'])} {e} * K.i32({value})")
        e = self.counter()
        args = r.choice([(-3, 4, 2), (2, -5, -3), (-1, -4, -1), (0, -2)])
        self.emit(1, f"for {e} in K.static_range({_text(args)}):")
        self.emit(2, f"ci = ci * {e} + {r.choice(['1', 'K.i32(n0)', e])}")

    def early_return(self, name: str) -> None:
        """A kernel-level ``return`` inside an unrolled body, under a rare condition."""
        kind, shape = self.arrays[name]
        e = self.counter()
        args = _cover(self.rng, shape[0])
        self.emit(1, f"for {e} in K.static_range({_text(args)}):")
        index = ", ".join([e, *(str(self.rng.randrange(d)) for d in shape[1:])])
        here = f"{name}[{index}]"
        rare = f"K.u32(n{self.rng.randrange(3)}) % 7 == {e}"
        self.emit(2, f"if {here} > {self.value(kind, 1, len(range(*args)))} and {rare}:")
        self.emit(3, "return")

    def results(self) -> tuple[str | None, str | None]:
        """``vf`` and ``vi`` from the arrays, or None where no array of that kind is."""
        b, r = self.body, self.rng
        terms: dict[str, str | None] = {"f": None, "i": None}
        for name, (kind, shape) in self.arrays.items():
            out = "vf" if kind == "f" else "vi"
            const = f"{name}[{self.constant_index(name)}]"
            runtime = f"{name}[{self.runtime_index(name)}]"
            self.emit(1, f"{out} = {const} {r.choice(['+', '-'])} {runtime}")
            e = self.counter()
            step = r.choice(["", ", 1", ", 2"])
            self.emit(1, f"for {e} in K.static_range({'0, ' if step else ''}{shape[0]}{step}):")
            index = ", ".join([e, *(str(self.rng.randrange(d)) for d in shape[1:])])
            fold = r.choice([f"{out} + {name}[{index}]", f"K.max({out}, {name}[{index}])"])
            self.emit(2, f"{out} = {fold}")
            self.leaves()
            self.emit(1, f"{out} = {out} {r.choice(['+', '-'])} {self.value(kind, 2)}")
            if kind == "i":
                self.emit(1, f"vi = vi + K.{self.I}({name}.len + {name}.shape[{len(shape) - 1}])")
            terms[kind] = out
        b.f_leaves.clear()
        b.i_leaves.clear()
        return terms["f"], terms["i"]

    def generate(self) -> tuple[str | None, str | None]:
        r = self.rng
        kinds = r.choice([("f",), ("i",), ("f", "i")])
        for kind in kinds:
            name = f"r{kind}"
            shape = _shape(r)
            self.arrays[name] = (kind, shape)
            size = shape[0] if len(shape) == 1 and r.random() < 0.7 else shape
            T = self.F if kind == "f" else self.I
            self.emit(1, f"{name} = K.registers(K.{T}, {size})")
        for name in self.arrays:
            for _ in range(r.randint(1, 2)):
                self.fill(name)
            self.leaves()
            for _ in range(r.randint(1, 4)):
                self.update(name)
            self.body.f_leaves.clear()
            self.body.i_leaves.clear()
        if r.random() < 0.5:
            self.counters_meet_types()
        if r.random() < 0.3:
            self.early_return(r.choice(list(self.arrays)))
        f_term, i_term = self.results()
        if self.counted:
            I = self.I  # noqa: E741
            if i_term is None:
                self.emit(1, f"vi = K.{I}(cu) - K.{I}(ci)")
                i_term = "vi"
            else:
                self.emit(1, f"vi = vi + K.{I}(cu) - K.{I}(ci)")
        return f_term, i_term


def registers(body: _Body, rng: random.Random) -> tuple[str | None, str | None]:
    """Write the register part of a kernel into ``body`` (at its top level) from ``rng``; the
    names of its float and int results (``vf``, ``vi``), None for a kind it has no array of."""
    saved = body.rng
    body.rng = rng
    try:
        return _Registers(body).generate()
    finally:
        body.rng = saved
        body.f_leaves.clear()
        body.i_leaves.clear()

"""A seeded random DSL kernel generator for the differential test (``test_differential.py``).

Every generated kernel has the same signature: float inputs ``x``, ``y``, int input ``m``, an
int scalar ``s``, and four outputs per thread: ``fo`` (a float computed with operations every
target rounds identically), ``io`` (an int), ``bo`` (a bool) and ``fa`` (a float through one
operation that
targets only approximate: ``/``, ``sqrt``, ``exp``, ``log``, ``sin``, ``cos``, ``tanh``, ``**``,
``fma``; compared with a tolerance). Bodies mix locals, arithmetic (wrapping ints), comparisons,
``and``/``or``/``not``, casts (saturating float -> int), ``K.select``, math intrinsics, ``if``,
``for``/``while`` loops with ``break``/``continue`` and early ``return``. Inputs mix random
values with edge cases (0, -0, +-inf, NaN, the type's extremes).

Every second kernel also cooperates (a shared array, a barrier, an atomic), from a random stream
of its own so the kernels above stay what they were: before any ``return``, each unit stages a
value in a shared array, meets the cube at ``K.sync_cube()``, reads a neighbour's value and adds
an int to a shared counter with ``K.atomic_add`` (order-independent: ints wrap); ``fo`` and
``io`` then fold in what it read, through a generated ``@K.func`` with early returns (also from
inside its loop); ``io`` also folds in subgroup shuffles, a ballot and reductions
(:data:`_SUBGROUP`).

Two of every three cooperative kernels also stage ``x`` in shared memory with asynchronous
copies (:mod:`dsl_fuzz_copies`, from a stream of their own); ``fo`` folds in what they read.

Every third kernel also works on register arrays in unrolled loops (``K.registers``,
``K.static_range``), from a stream of its own too, after the statements above and before the
outputs: :mod:`dsl_fuzz_registers` says what those parts hold; ``fo`` and ``io`` fold in their
results.

:func:`generate` gives the source of a module of kernels (kernel source must live in a file);
:func:`inputs` the arrays for one kernel. Same seed, same kernels and inputs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from support import dsl_fuzz_copies, dsl_fuzz_registers

THREADS = 64
STRIDED = {"y": 2}
"""Inputs passed as a strided 1-D view (every ``step``-th element of a storage ``step`` times
longer): the kernels read them with a linear ``y[i]``, which must follow the stride."""


@dataclass(frozen=True)
class Profile:
    """The scalar types of one kernel: its float type and its int type."""

    float_type: str  # K name: f32, f16, f64
    int_type: str  # K name: i32, u32, i64

    @property
    def float_dtype(self) -> np.dtype:
        return np.dtype({"f32": np.float32, "f16": np.float16, "f64": np.float64}[self.float_type])

    @property
    def int_dtype(self) -> np.dtype:
        return np.dtype({"i32": np.int32, "u32": np.uint32, "i64": np.int64}[self.int_type])


PROFILES = (
    Profile("f32", "i32"),
    Profile("f32", "u32"),
    Profile("f16", "i32"),
    Profile("f64", "i64"),
    Profile("f32", "i64"),
    Profile("f64", "u32"),
)

APPROX = ("div", "sqrt", "exp", "log", "sin", "cos", "tanh", "pow", "fma")


@dataclass(frozen=True)
class GeneratedKernel:
    name: str
    profile: Profile
    approx: str  # the approximate operation giving ``fa``


class _Body:
    """Random statements and expressions for one kernel."""

    def __init__(self, rng: random.Random, profile: Profile) -> None:
        self.rng = rng
        self.p = profile
        self.lines: list[str] = []
        self.loops = 0
        self.loop_vars: list[str] = []  # i32 counters in scope
        # more leaves (register array reads): empty outside the register part, so the
        # choices above stay what they were
        self.f_leaves: list[str] = []
        self.i_leaves: list[str] = []
        # float % (an exact fmod, a loop in WGSL): not in an unrolled body of many trips, whose
        # copies of that loop make llvmpipe's shader compile take minutes
        self.fmod = True
        self.budget = 14  # statements left

    # -------------------------------------------------------- expressions

    def literal_float(self) -> str:
        # no zero: two literals fold at compile time, and x % 0.0 there is a DslError
        return self.rng.choice(["1.0", "-1.0", "0.5", "2.0", "3.0", "-2.5", "7.0", "0.25"])

    def typed(self, code: str, kind: str) -> str:
        """A bare literal as a typed value (where it would meet no typed operand, it would
        default to i32/f32 instead of the profile's type)."""
        if code.lstrip("-").replace(".", "", 1).isdigit():
            return f"K.{self.p.float_type if kind == 'f' else self.p.int_type}({code})"
        return code

    def literal_int(self) -> str:
        choices = ["0", "1", "2", "3", "5", "7", "100"]
        if self.p.int_type != "u32":
            choices += ["-1", "-3"]
        return self.rng.choice(choices)

    def fexpr(self, depth: int) -> str:
        """A float expression with correctly rounded operations only."""
        r = self.rng
        F = self.p.float_type
        if depth <= 0 or r.random() < 0.25:
            return r.choice(
                [
                    "f0",
                    "f1",
                    "f2",
                    "x[i]",
                    "y[i]",
                    "x[(i + 1) % x.len]",
                    self.literal_float(),
                    f"K.{F}({self.iexpr(0)})",
                    *self.f_leaves,
                ]
            )
        k = r.randrange(10)
        a, b = self.typed(self.fexpr(depth - 1), "f"), self.fexpr(depth - 1)
        if k <= 3:
            return f"({a} {r.choice(['+', '-', '*'])} {b})"
        if k == 4:
            return f"({a} {'%' if self.fmod else '-'} {b})"
        if k == 5:
            return f"K.{r.choice(['floor', 'ceil', 'abs'])}({a})"
        if k == 6:
            return f"K.{r.choice(['min', 'max'])}({a}, {b})"
        if k == 7:
            return f"K.select({self.cond(depth - 1)}, {a}, {self.typed(b, 'f')})"
        if k == 8:
            return f"(-{a})"
        return f"K.{F}({self.iexpr(depth - 1)})"

    def iexpr(self, depth: int) -> str:
        """An int expression of the profile's int type (wrapping, no division by zero)."""
        r = self.rng
        I = self.p.int_type  # noqa: E741
        leaves = ["n0", "n1", "n2", "m[i]", "s", f"K.{I}(i)", self.literal_int()]
        leaves += [f"K.{I}({j})" for j in self.loop_vars]
        leaves += self.i_leaves
        if depth <= 0 or r.random() < 0.25:
            return r.choice(leaves)
        k = r.randrange(9)
        a, b = self.typed(self.iexpr(depth - 1), "i"), self.typed(self.iexpr(depth - 1), "i")
        if k <= 3:
            return f"({a} {r.choice(['+', '-', '*'])} {b})"
        if k == 4:
            # a positive divisor: no division by zero, no INT_MIN // -1
            return f"({a} {r.choice(['//', '%'])} K.select({b} > 0, {b}, 7))"
        if k == 5:
            return f"K.abs({a})" if r.random() < 0.3 else f"K.{r.choice(['min', 'max'])}({a}, {b})"
        if k == 6:
            return f"K.select({self.cond(depth - 1)}, {a}, {b})"
        if k == 7 and I != "u32":
            return f"(-{a})"
        return f"K.{I}({self.fexpr(depth - 1)})"  # saturating cast

    def cond(self, depth: int) -> str:
        r = self.rng
        k = r.randrange(8)
        op = r.choice(["<", "<=", ">", ">=", "==", "!="])
        if k == 7:
            return r.choice(["b0", "(b0 == K.bool_(x[i]))", "(b0 != (s > 3))"])
        if k <= 2 or depth <= 0:
            return f"({self.fexpr(max(depth - 1, 0))} {op} {self.fexpr(max(depth - 1, 0))})"
        if k == 3:
            return f"({self.iexpr(depth - 1)} {op} {self.iexpr(depth - 1)})"
        if k == 4:
            return f"K.bool_({self.fexpr(depth - 1)})"
        if k == 5:
            return f"({self.cond(depth - 1)} {r.choice(['and', 'or'])} {self.cond(depth - 1)})"
        return f"(not {self.cond(depth - 1)})"

    # -------------------------------------------------------- statements

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def block(self, indent: int, n: int, in_loop: bool) -> None:
        for _ in range(n):
            if self.budget <= 0:
                break
            self.stmt(indent, in_loop)
        if not self.lines or not self.lines[-1].startswith("    " * indent):
            self.emit(indent, "pass")

    def stmt(self, indent: int, in_loop: bool) -> None:
        r = self.rng
        self.budget -= 1
        k = r.randrange(12)
        if k <= 2:
            self.emit(indent, f"f{r.randrange(3)} = {self.fexpr(3)}")
        elif k <= 4:
            self.emit(indent, f"n{r.randrange(3)} = {self.iexpr(3)}")
        elif k == 5:
            op = r.choice(["+=", "-=", "*="])
            target = r.choice([f"f{r.randrange(3)}", f"n{r.randrange(3)}"])
            value = self.fexpr(2) if target[0] == "f" else self.iexpr(2)
            self.emit(indent, f"{target} {op} {value}")
        elif k <= 7 and indent < 4:
            self.emit(indent, f"if {self.cond(2)}:")
            self.block(indent + 1, r.randint(1, 2), in_loop)
            if r.random() < 0.5:
                self.emit(indent, "else:")
                self.block(indent + 1, r.randint(1, 2), in_loop)
        elif k == 8 and indent < 4 and self.loops < 3:
            j = f"j{self.loops}"
            self.loops += 1
            rng_args = r.choice(["4", "0, 3", "5, 0, -2", "1, 6, 2"])
            self.emit(indent, f"for {j} in range({rng_args}):")
            self.loop_vars.append(j)
            self.block(indent + 1, r.randint(1, 3), True)
            self.loop_vars.pop()
        elif k == 9 and indent < 4 and self.loops < 3:
            w = f"w{self.loops}"
            self.loops += 1
            self.emit(indent, f"{w} = 0")
            self.emit(indent, f"while {w} < 3 and {self.cond(1)}:")
            self.emit(indent + 1, f"{w} += 1")
            self.block(indent + 1, r.randint(1, 2), True)
        elif k == 10 and in_loop:
            self.emit(indent, f"if {self.cond(1)}:")
            self.emit(indent + 1, r.choice(["break", "continue"]))
        elif k == 11 and r.random() < 0.3:
            self.emit(indent, f"if {self.cond(1)}:")
            self.emit(indent + 1, "return")
        elif k == 11:
            self.emit(indent, f"b0 = {self.cond(2)}")
        else:
            self.emit(indent, f"f{r.randrange(3)} = {self.fexpr(2)}")

    def approx(self, op: str) -> str:
        """``fa``: one approximate operation on exactly computed values, arguments kept where
        every target's math library is accurate (documented tolerances)."""
        F = self.p.float_type
        a, b, c = (self.typed(self.fexpr(d), "f") for d in (2, 2, 1))

        def clamp(v: str, lo: str, hi: str) -> str:
            return f"K.min(K.max({v}, {lo}), {hi})"

        if op == "div":  # WGSL leaves divisors beyond 2^126 unspecified (NVIDIA: 0)
            return f"({a} / K.select(K.abs({b}) < 1e30, {b}, K.{F}(3)))"
        if op == "sqrt":
            return f"K.sqrt({a})"
        if op == "exp":
            return f"K.exp({clamp(a, '-20.0', '20.0')})"
        if op == "log":
            return f"K.log({a})"
        if op in ("sin", "cos"):
            return f"K.{op}({clamp(a, '-20.0', '20.0')})"
        if op == "tanh":
            return f"K.tanh({clamp(a, '-10.0', '10.0')})"
        if op == "pow":
            exponent = self.rng.choice(
                [
                    clamp(b, "-4.0", "4.0"),
                    "2.0",
                    "3.0",
                    "0.5",
                    "-1.0",
                    f"K.{F}(K.i32({clamp(b, '-5.0', '5.0')}))",
                ]
            )
            return f"({clamp(a, '-30.0', '30.0')} ** {exponent})"
        # WGSL may not fuse: operands kept where the unfused product cannot overflow
        a, b, c = (clamp(v, "-1e4", "1e4") for v in (a, b, c))
        return f"K.fma({a}, {b}, {c})"


CUBE = THREADS // 2
"""Units per cube of a differential launch (two cubes)."""


def _device_function(name: str, rng: random.Random) -> str:
    """A float helper ``name(a, b)`` with early returns, typed from its call site."""
    op1, op2 = rng.choice(["+", "-", "*"]), rng.choice(["+", "-", "*"])
    cmp = rng.choice(["<", ">", "<=", "!="])
    return (
        "@K.func\n"
        f"def {name}(a, b):\n"
        f"    if a {cmp} b:\n"
        f"        return a {op1} b\n"
        "    t = a\n"
        f"    for q in range({rng.randint(1, 3)}):\n"
        "        if t > b:\n"
        "            return t\n"
        f"        t = t {op2} b\n"
        "    return K.min(t, a)\n"
    )


def _cooperation(profile: Profile, rng: random.Random) -> list[str]:
    """The cooperative prelude: ``c1`` (a neighbour's staged float, through a shared array
    sized at launch) and ``k0`` (the cube's counter of ``m`` values in one of 4 slots of a 2-D
    shared array)."""
    F, I = profile.float_type, profile.int_type  # noqa: E741
    op = rng.choice(["+", "-", "*"])
    return [
        "sh = K.shared(K." + F + ", ns)",  # sized at launch: ns == CUBE
        f"ish = K.shared(K.{I}, (2, 2))",
        "u = K.UNIT_POS",
        f"c0 = K.{F}(0)",
        "if K.ABSOLUTE_POS < x.len:",
        f"    c0 = x[K.ABSOLUTE_POS] {op} y[K.ABSOLUTE_POS]",
        "sh[u] = c0",
        "if u < 4:",
        f"    ish[u] = K.{I}(0)",
        "K.sync_cube()",
        f"c1 = sh[(u + {rng.randint(1, CUBE - 1)}) % K.CUBE_DIM]",
        "K.atomic_add(ish, u % 4, m[K.ABSOLUTE_POS % m.len])",
        "K.sync_cube()",
        "k0 = ish[u % 2, (u // 2) % 2]",  # column-major: the element u % 4
        *_SUBGROUP,
    ]


_SUBGROUP = (
    "gv = K.i32(m[K.ABSOLUTE_POS % m.len])",
    "g0 = gv + K.subgroup_shuffle_xor(gv, K.u32(1))",
    "g1 = K.subgroup_shuffle(gv, K.SUBGROUP_UNIT_POS - K.SUBGROUP_UNIT_POS % 2)",
    "p2 = K.u32(1)",  # 2 ** (the pair's first lane): the DSL has no shifts
    "for t2 in range(K.SUBGROUP_UNIT_POS % 32 - u % 2):",
    "    p2 = p2 * 2",
    "g2 = K.i32((K.subgroup_ballot(gv > 0) // p2) % 4)",
    "q0 = K.subgroup_add(K.u32(1)) == K.SUBGROUP_SIZE",
    "q1 = K.subgroup_max(gv) >= gv",
    "q2 = K.subgroup_min(gv) <= gv",
    "g3 = K.select(q0, 0, 1000) + K.select(q1, 0, 100) + K.select(q2, 0, 10)",
)
"""Subgroup operations of the cooperative prelude, as ``kg``: each result is the same at
every subgroup size from 2 to 32 (a unit's pair ``2j, 2j + 1`` is in one subgroup; a
reduction is checked against the unit's own value and the subgroup size), so the interpreter
at 32 is the reference for llvmpipe's subgroups of 8; ints wrap."""


def _kernel_source(
    name: str,
    profile: Profile,
    rng: random.Random,
    approx: str,
    coop: random.Random | None = None,
    regs: random.Random | None = None,
    staged: random.Random | None = None,
) -> str:
    F, I = profile.float_type, profile.int_type  # noqa: E741
    body = _Body(rng, profile)
    helper = ""
    if coop is not None:
        helper = _device_function(f"h_{name}", coop) + "\n\n"
        for line in _cooperation(profile, coop):
            body.emit(1, line)
        if staged is not None:
            item = profile.float_dtype.itemsize
            for line in dsl_fuzz_copies.copies(F, item, CUBE, THREADS, staged):
                body.emit(1, line)
    for line in (
        "i = K.ABSOLUTE_POS",
        "if i >= x.len:",
        "    return",
        "f0 = x[i]",
        "f1 = y[i]",
        f"f2 = K.{F}(0)",
        "n0 = m[i]",
        "n1 = s",
        f"n2 = K.{I}(1)",
        "b0 = f0 < f1",
        "w0, w1, w2, w3 = K.load4(x, i // 4)",  # a vector load of a compact view
        "z0, z1, z2, z3 = K.load4(y, i // 4)",  # of a strided one: through its stride
    ):
        body.emit(1, line)
    body.block(1, rng.randint(3, 7), False)
    fo, io = body.fexpr(3), body.iexpr(3)
    if regs is not None:
        vf, vi = dsl_fuzz_registers.registers(body, regs)
        fo = fo if vf is None else f"({body.typed(fo, 'f')} {regs.choice('+-')} {vf})"
        io = io if vi is None else f"({body.typed(io, 'i')} {regs.choice('+-')} {vi})"
    if coop is not None:
        fo = f"h_{name}({'c1 + ca' if staged else 'c1'}, {body.typed(fo, 'f')})"
        body.emit(1, f"kg = K.{I}(g0 + g1 * 3 + g2 * 7 + g3)")
        io = f"({body.typed(io, 'i')} + k0 + kg)"
    body.emit(1, f"fo[i] = {fo}")
    body.emit(1, f"io[i] = {io}")
    body.emit(1, f"fa[i] = {body.approx(approx)}")
    body.emit(1, f"bo[i] = {body.cond(2)}")
    # the vector lanes stored: drawn apart, so the kernels' other choices stay as they were
    picks = random.Random(f"{name}-store4").sample(
        ["w0", "w1", "w2", "w3", "z0", "z1", "z2", "z3", "f0", "f1"], 4
    )
    lanes = ", ".join(picks)
    body.emit(1, f"K.store4(vo, i, {lanes})")
    header = (
        "@K.kernel\n"
        f"def {name}(fo: K.Array[K.{F}], io: K.Array[K.{I}], fa: K.Array[K.{F}], "
        f"vo: K.Array[K.{F}], "
        f"bo: K.Array[K.bool_], x: K.Array[K.{F}], y: K.Array[K.{F}], m: K.Array[K.{I}], "
        f"s: K.{I}, ns: K.u32):\n"
    )
    return helper + header + "\n".join(body.lines) + "\n"


def generate(seed: int, count: int) -> tuple[str, list[GeneratedKernel]]:
    """The source of a module with ``count`` kernels ``k0 ..``, and what each one is."""
    rng = random.Random(seed)
    parts = [
        "# ruff: noqa\n# generated by tests/support/dsl_fuzz.py\n",
        "from tenferro_host import kernel as K\n",
    ]
    kernels = []
    for n in range(count):
        profile = PROFILES[n % len(PROFILES)] if n < len(PROFILES) else rng.choice(PROFILES)
        approx = rng.choice(APPROX)
        name = f"k{n}"
        coop = random.Random(seed * 1_000_003 + n) if n % 2 else None
        regs = random.Random(f"{seed}-{n}-registers") if n % 3 == 2 else None
        staged = random.Random(f"{seed}-{n}-copies") if coop and n % 3 else None
        parts.append(_kernel_source(name, profile, rng, approx, coop, regs, staged))
        kernels.append(GeneratedKernel(name, profile, approx))
    return "\n\n".join(parts), kernels


def _edge_floats(dt: np.dtype) -> list[float]:
    info = np.finfo(dt)
    return [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        2.0,
        -3.0,
        float(info.max),
        -float(info.max),
        np.inf,
        -np.inf,
        np.nan,
        1e4,
        -65504.0,
        2147483648.0,
        4294967296.0,
    ]


def _edge_ints(dt: np.dtype) -> list[int]:
    info = np.iinfo(dt)
    return [0, 1, 2, 3, -1, 7, int(info.max), int(info.min), int(info.max) - 1, 1000]


def inputs(seed: int, profile: Profile) -> dict[str, np.ndarray | np.generic]:
    """Inputs of one kernel: random values and edge cases, the same for every target."""
    rng = np.random.default_rng(seed)
    fdt, idt = profile.float_dtype, profile.int_dtype

    def floats() -> np.ndarray:
        values = rng.uniform(-8, 8, THREADS)
        whole = rng.random(THREADS) < 0.2  # integral values: floor/fmod/cast boundaries
        values[whole] = np.round(values[whole])
        edges = _edge_floats(fdt)
        picks = rng.random(THREADS) < 0.3
        values[picks] = rng.choice(edges, int(picks.sum()))
        with np.errstate(over="ignore"):
            return values.astype(fdt)

    def ints() -> np.ndarray:
        info = np.iinfo(idt)
        lo = max(int(info.min), -50)
        values = rng.integers(lo, 50, THREADS).astype(np.int64)
        picks = rng.random(THREADS) < 0.3
        edges = [v for v in _edge_ints(idt) if info.min <= v <= info.max]
        values[picks] = rng.choice(edges, int(picks.sum()))
        return values.astype(idt)

    return {
        "fo": np.zeros(THREADS, fdt),
        "io": np.zeros(THREADS, idt),
        "fa": np.zeros(THREADS, fdt),
        "vo": np.zeros(4 * THREADS, fdt),  # K.store4(vo, i, ...): four per thread
        "bo": np.zeros(THREADS, np.bool_),
        "x": floats(),
        "y": np.stack([floats(), floats()], axis=1).reshape(-1),  # viewed as [::2]
        "m": ints(),
        "s": idt.type(rng.integers(0, 20)),
        "ns": np.uint32(CUBE),
    }


__all__ = [
    "APPROX",
    "PROFILES",
    "STRIDED",
    "THREADS",
    "GeneratedKernel",
    "Profile",
    "generate",
    "inputs",
]

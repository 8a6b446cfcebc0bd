"""The m16n8k16 lane formulas of the CUDA codegen (``_codegen/_mma_lanes.py``), without a GPU:
PTX's documented register layout at sample lanes, ``ldmatrix`` simulated by its rule (lanes
``8q .. 8q + 7`` give matrix ``q``'s rows; unit ``t`` receives row ``t / 4``, columns
``2 (t % 4)`` and the next, or the transpose's) delivering exactly the elements that layout
puts in each register, for every use and layout; and the emitted C equal to the formula."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tenferro_host_cuda_jit._codegen._mma_lanes import (
    CExpr,
    ldmatrix_row,
    position,
    register_element,
    transposed,
)

from tenferro_host import dtypes
from tenferro_host.kernel import ir

LANES = range(32)


def ftype(use: str, layout: str) -> ir.FragmentType:
    dtype = dtypes.float32 if use == "accumulator" else dtypes.float16
    return ir.FragmentType(use, 16, 8, 16, dtype, layout)


@pytest.mark.parametrize(
    "use,lane,register,half,element",
    [  # PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"
        ("a", 0, 0, 0, (0, 0)),
        ("a", 5, 0, 1, (1, 3)),
        ("a", 5, 1, 0, (9, 2)),
        ("a", 5, 2, 0, (1, 10)),
        ("a", 31, 3, 1, (15, 15)),
        ("b", 5, 0, 0, (2, 1)),
        ("b", 5, 1, 1, (11, 1)),
        ("b", 31, 1, 1, (15, 7)),
        ("accumulator", 5, 0, 0, (1, 2)),
        ("accumulator", 5, 1, 0, (1, 3)),
        ("accumulator", 5, 2, 0, (9, 2)),
        ("accumulator", 31, 3, 0, (15, 7)),
    ],
)
def test_the_register_layout_is_ptxs(
    use: str, lane: int, register: int, half: int, element: tuple[int, int]
) -> None:
    assert register_element(ftype(use, "row"), register, half, lane) == element


def test_every_element_is_in_one_register_of_one_lane() -> None:
    for use, (rows, cols, regs, halves) in {
        "a": (16, 16, 4, 2),
        "b": (16, 8, 2, 2),
        "accumulator": (16, 8, 4, 1),
    }.items():
        t = ftype(use, "row")
        held = [
            register_element(t, r, h, lane)
            for lane in LANES
            for r in range(regs)
            for h in range(halves)
        ]
        assert sorted(held) == [(i, j) for i in range(rows) for j in range(cols)]


def ldmatrix(memory: np.ndarray, rows: list[int], count: int, trans: bool) -> np.ndarray:
    """``ldmatrix.x{count}[.trans]``: ``out[t, q, h]``, the half ``h`` of register ``q`` of
    unit ``t``, given the start of the row each unit hands it."""
    out = np.empty((32, count, 2), memory.dtype)
    for q in range(count):
        matrix = np.stack([memory[rows[8 * q + r] : rows[8 * q + r] + 8] for r in range(8)])
        if trans:
            matrix = matrix.T
        for t in LANES:
            out[t, q] = matrix[t // 4, 2 * (t % 4) : 2 * (t % 4) + 2]
    return out


@pytest.mark.parametrize("use", ["a", "b"])
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("ld", [16, 24, 40])
def test_ldmatrix_delivers_each_register_its_elements(use: str, layout: str, ld: int) -> None:
    t = ftype(use, layout)
    start = 8
    memory = np.arange(start + 16 * ld + 16, dtype=np.int64)  # each element its own value
    count = 4 if use == "a" else 2
    rows = [start + ldmatrix_row(t, lane, ld) for lane in LANES]
    got = ldmatrix(memory, rows, count, transposed(t))
    for lane in LANES:
        for r in range(count):
            for h in range(2):
                i, j = register_element(t, r, h, lane)
                assert got[lane, r, h] == memory[start + position(t, i, j, ld)], (lane, r, h)


def _evaluate(c: CExpr, lane: int, ld: int) -> int:
    python = re.sub(r"\b(\d+)u\b", r"\1", c.text)
    return int(eval(python, {}, {"lane": lane, "ld": ld}))  # noqa: S307 - the codegen's own C


@pytest.mark.parametrize("use", ["a", "b", "accumulator"])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_the_c_the_emitter_writes_is_the_formula(use: str, layout: str) -> None:
    t = ftype(use, layout)
    lane, ld = CExpr("lane"), CExpr("ld")
    for n in LANES:
        for stride in (16, 40):
            if use != "accumulator":
                assert _evaluate(ldmatrix_row(t, lane, ld), n, stride) == ldmatrix_row(t, n, stride)
            i, j = register_element(t, 1, 0, lane)
            assert _evaluate(position(t, i, j, ld), n, stride) == position(
                t, *register_element(t, 1, 0, n), stride
            )

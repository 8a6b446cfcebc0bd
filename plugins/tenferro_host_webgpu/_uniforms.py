"""Dispatch geometry and the uniform block every generated shader reads: its layout
(:class:`UniformLayout`, used by the generator), its declaration and its host-side packing
(:class:`UniformBlock`, :func:`pack_uniforms`, used at launch).

WebGPU caps each dispatch dimension (65535 workgroups on every adapter seen so far). A logical
grid of cubes beyond it arrives *folded* (``tenferro_host.provider.fold_grid``): its
cubes numbered linearly over as few physical dimensions as fit; the shader unfolds the physical
workgroup id back into the logical cube position and skips the padding workgroups. Offsets,
lengths, shapes, strides, scalars and the grid reach the shader through one uniform buffer of
u32 words (``array<vec4<u32>, N>``); the generator knows each value's word index at compile
time.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tenferro_host import DType
from tenferro_host.kernel import Specialization
from tenferro_host.kernel.ir import Param
from tenferro_host.provider import numel

#: Words 0-4 of every uniform block: logical cube count x, y, z; physical dispatch x, y.
GRID_WORDS = 5
_U32 = 1 << 32


def word(index: int) -> str:
    """WGSL expression reading uniform word ``index`` as u32."""
    return f"P.w[{index // 4}].{'xyzw'[index % 4]}"


_PRIVATES = """\
var<private> cube_index: u32;
var<private> cube_pos: vec3<u32>;
var<private> cube_count: vec3<u32>;
var<private> unit_pos: vec3<u32>;
var<private> unit_index: u32;
"""

_UNFOLD = f"""\
    let linear = wg.x + wg.y * {word(3)} + wg.z * {word(3)} * {word(4)};
    if (linear >= cube_count.x * cube_count.y * cube_count.z) {{
        return false;
    }}
    cube_index = linear;
    cube_pos = vec3<u32>(
        linear % cube_count.x,
        (linear / cube_count.x) % cube_count.y,
        linear / (cube_count.x * cube_count.y),
    );
"""

_DIRECT = """\
    cube_pos = wg;
    cube_index = wg.x + cube_count.x * (wg.y + cube_count.y * wg.z);
"""


def grid_prelude(folded: bool) -> str:
    """WGSL declarations and ``unfold_grid``, which ``main`` calls first. An unfolded grid is
    dispatched as is (no division per thread); a folded one is renumbered linearly."""
    return (
        _PRIVATES
        + "\nfn unfold_grid(wg: vec3<u32>, lid: vec3<u32>, lidx: u32) -> bool {\n"
        + f"    cube_count = vec3<u32>({word(0)}, {word(1)}, {word(2)});\n"
        + (_UNFOLD if folded else _DIRECT)
        + "    unit_pos = lid;\n    unit_index = lidx;\n    return true;\n}\n"
    )


def entry_point(body_call: str, dim: tuple[int, int, int], builtins: str = "") -> str:
    """``main``: unfold the grid, then run the body in a function of its own (``return`` ends
    the thread there); ``builtins``: more parameters of ``main`` (``, @builtin(...) name: T``)."""
    return (
        f"@compute @workgroup_size({dim[0]}, {dim[1]}, {dim[2]})\n"
        "fn main(@builtin(workgroup_id) wg: vec3<u32>, "
        "@builtin(local_invocation_id) lid: vec3<u32>, "
        f"@builtin(local_invocation_index) lidx: u32{builtins}) {{\n"
        "    if (unfold_grid(wg, lid, lidx)) {\n"
        f"        {body_call};\n"
        "    }\n"
        "}\n"
    )


def uniform_decl(nwords: int) -> str:
    """The uniform block with room for ``nwords`` words (at least one vec4)."""
    return (
        f"struct Params {{ w: array<vec4<u32>, {max(1, -(-nwords // 4))}> }}\n"
        "@group(0) @binding(0) var<uniform> P: Params;\n"
    )


@dataclass
class UniformBlock:
    """Host side of the uniform block: u32 words appended in the generator's order."""

    words: list[int] = field(default_factory=list)

    def grid(self, count: tuple[int, int, int], physical: tuple[int, int, int]) -> None:
        assert not self.words, "the grid comes first"
        self.words.extend([*count, physical[0], physical[1]])

    def u32(self, value: int) -> None:
        """A u32 word; negative ints (strides) wrap modulo 2^32 like the shader's arithmetic."""
        self.words.append(int(value) % _U32)

    def extend(self, values: Sequence[int]) -> None:
        """u32 words, as :meth:`u32` (one list operation, not a call per word)."""
        self.words.extend([int(v) % _U32 for v in values])

    def scalar(self, value: float | int | bool, dtype: DType) -> None:
        """A scalar parameter's bits: f32 as IEEE bits, f16 widened to f32, ints and bools."""
        if dtype.category == "float":
            self.words.append(struct.unpack("<I", struct.pack("<f", float(value)))[0])
        elif dtype.category == "bool":
            self.words.append(1 if value else 0)
        else:
            self.u32(int(value))

    def tobytes(self) -> bytes:
        """The words padded to whole vec4s (at least one), as the shader declares them."""
        n = max(4, -(-len(self.words) // 4) * 4)
        return np.asarray(self.words + [0] * (n - len(self.words)), dtype=np.uint32).tobytes()


@dataclass(frozen=True)
class UniformLayout:
    """Word index of each parameter's first uniform word, and the total word count."""

    starts: tuple[int, ...]
    nwords: int

    @classmethod
    def of(cls, params: Sequence[Param]) -> UniformLayout:
        """The uniform word layout of a kernel's parameters, after the grid words."""
        starts = []
        at = GRID_WORDS
        for p in params:
            starts.append(at)
            at += 2 + 2 * (p.ndim or 0) if p.kind == "array" else 1
        return cls(tuple(starts), at)


@dataclass(frozen=True)
class ArrayView:
    """What the uniform block needs about one array argument."""

    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def pack_uniforms(
    spec: Specialization,
    count: tuple[int, int, int],
    physical: tuple[int, int, int],
    args: Sequence[ArrayView | float | int | bool],
) -> bytes:
    """The uniform block for one launch; ``args`` align with ``spec.params``."""
    block = UniformBlock()
    block.grid(count, physical)
    for p, a in zip(spec.params, args, strict=True):
        if p.kind == "array":
            assert isinstance(a, ArrayView)
            block.extend([a.offset, numel(a.shape), *a.shape, *a.strides])
        else:
            assert not isinstance(a, ArrayView)
            block.scalar(a, p.dtype)
    return block.tobytes()


__all__ = [
    "GRID_WORDS",
    "ArrayView",
    "UniformBlock",
    "UniformLayout",
    "entry_point",
    "grid_prelude",
    "pack_uniforms",
    "uniform_decl",
    "word",
]

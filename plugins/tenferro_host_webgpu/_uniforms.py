"""Dispatch geometry and the uniform block every generated shader reads.

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


def entry_point(body_call: str, dim: tuple[int, int, int]) -> str:
    """``main``: unfold the grid, then run the body in a function of its own (``return`` ends
    the thread there)."""
    return (
        f"@compute @workgroup_size({dim[0]}, {dim[1]}, {dim[2]})\n"
        "fn main(@builtin(workgroup_id) wg: vec3<u32>, "
        "@builtin(local_invocation_id) lid: vec3<u32>, "
        "@builtin(local_invocation_index) lidx: u32) {\n"
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

    def scalar(self, value: float | int | bool, wgsl_type: str) -> None:
        """A scalar parameter's bits: f32 as IEEE bits, f16 widened to f32, ints and bools."""
        if wgsl_type in ("f32", "f16"):
            self.words.append(struct.unpack("<I", struct.pack("<f", float(value)))[0])
        elif wgsl_type == "bool":
            self.words.append(1 if value else 0)
        else:
            self.u32(int(value))

    def tobytes(self) -> bytes:
        """The words padded to whole vec4s (at least one), as the shader declares them."""
        n = max(4, -(-len(self.words) // 4) * 4)
        return np.asarray(self.words + [0] * (n - len(self.words)), dtype=np.uint32).tobytes()


__all__ = [
    "GRID_WORDS",
    "UniformBlock",
    "entry_point",
    "grid_prelude",
    "uniform_decl",
    "word",
]

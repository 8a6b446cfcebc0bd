"""The built-in shader behind ``canonicalize``: a strided view copied into a compact tensor.

One thread per element of the destination (column-major order); the thread turns its linear
index into coordinates with the view's shape and reads ``offset + sum(coord * stride)`` from the
source. Elements are moved as their storage words (u32, or f16 with ``shader-f16``), so every
stored dtype shares two shaders per rank.
"""

from __future__ import annotations

from ._uniforms import GRID_WORDS, UniformBlock, entry_point, grid_prelude, uniform_decl, word

WORKGROUP = 256


def storage_word(itemsize: int) -> str:
    """The WGSL element type that moves one stored element."""
    return "f16" if itemsize == 2 else "u32"


def source(elem: str, ndim: int, folded: bool) -> str:
    """WGSL copying a rank-``ndim`` view of ``elem`` elements into a compact buffer."""
    numel, offset = word(GRID_WORDS), word(GRID_WORDS + 1)
    shape = [word(GRID_WORDS + 2 + k) for k in range(ndim)]
    stride = [word(GRID_WORDS + 2 + ndim + k) for k in range(ndim)]
    lines = [
        f"    let j = cube_index * {WORKGROUP}u + unit_index;",
        f"    if (j >= {numel}) {{ return; }}",
        "    var rest = j;",
        f"    var src = {offset};",
    ]
    for k in range(ndim):
        lines.append(f"    src += (rest % {shape[k]}) * {stride[k]};")
        lines.append(f"    rest = rest / {shape[k]};")
    lines.append("    dst[j] = src_buf[src];")
    head = "enable f16;\n" if elem == "f16" else ""
    return (
        head
        + uniform_decl(GRID_WORDS + 2 + 2 * ndim)
        + f"@group(0) @binding(1) var<storage, read> src_buf: array<{elem}>;\n"
        + f"@group(0) @binding(2) var<storage, read_write> dst: array<{elem}>;\n"
        + grid_prelude(folded)
        + "fn copy() {\n"
        + "\n".join(lines)
        + "\n}\n"
        + entry_point("copy()", (WORKGROUP, 1, 1))
    )


def uniforms(
    block: UniformBlock, numel: int, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]
) -> bytes:
    """The uniform words after the grid: numel, offset, shape, strides."""
    block.extend([numel, offset, *shape, *strides])
    return block.tobytes()


__all__ = ["WORKGROUP", "source", "storage_word", "uniforms"]
